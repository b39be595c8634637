"""Embeddings from the configured deployment or model, for vector and hybrid search."""

from __future__ import annotations

from collections.abc import Sequence

from crag.providers.llm.client import LlmClient


class LlmEmbedder:
    """OpenAI-style embedding models have no query / passage roles: both are embedded alike."""

    def __init__(self, llm: LlmClient) -> None:
        self._llm = llm
        self.name = f"{llm.name}:{llm.embedding_model}"

    async def embed_query(self, text: str) -> list[float]:
        return (await self._llm.embed([text]))[0]

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._llm.embed(texts) if texts else []
