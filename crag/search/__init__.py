"""Document retrieval providers: the local index (default) and, later, Azure AI Search."""
