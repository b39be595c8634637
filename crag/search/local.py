"""Retriever over the local index."""

from __future__ import annotations

from crag.models import GradedChunk
from crag.search.local_index import LocalIndex


class LocalRetriever:
    name = "local-bm25"

    def __init__(self, index: LocalIndex) -> None:
        self._index = index

    async def search(self, query: str, top_k: int) -> list[GradedChunk]:
        # In-memory BM25 over mmap'd arrays takes well under a millisecond per query: no thread hop.
        hits = self._index.search_terms(self._index.terms(query), top_k)
        return [GradedChunk(chunk=h.chunk, retrieval_score=h.score) for h in hits]
