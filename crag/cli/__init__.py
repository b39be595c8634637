"""Command-line entry points of the engine: crag-ingest, crag-eval and the SharePoint sync."""
