"""Microsoft Graph: the app-only client (crag.providers.graph.client), its settings, and what the bot asks of
it
(a user's groups: crag.providers.graph.user_groups). SharePoint ingestion is in crag.ingest.sharepoint."""
