"""Microsoft Graph: the app-only client (crag.services.graph.client), its settings, and what the bot asks of
it
(a user's groups: crag.services.graph.membership). SharePoint ingestion is in crag.ingest.sharepoint."""
