"""Embeddings from the configured deployment or model, for vector and hybrid search."""

from __future__ import annotations

from collections.abc import Sequence

from crag.llm.client import LlmClient


class LlmEmbedder:
    def __init__(self, llm: LlmClient) -> None:
        self._llm = llm
        self.name = f"{llm.name}:{llm.embedding_model}"

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._llm.embed(texts)
