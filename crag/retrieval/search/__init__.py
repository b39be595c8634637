"""Document retrieval, the read side of the index (crag/ingest writes it): the local hybrid index and
Azure AI Search. Providers are registered in crag/config/providers.py."""
