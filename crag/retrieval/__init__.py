"""The read side of the index: embeddings (embed) under the retrievers (search)."""
