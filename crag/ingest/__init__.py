"""Files -> documents -> chunks, for the local index (and later Azure AI Search)."""
