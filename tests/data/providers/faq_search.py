"""A search provider written the way a new one is added: this module, in a real deployment placed in
crag/retrieval/search/, plus its one line in SEARCH_PROVIDERS. It answers from a JSON file of FAQ entries
named by its own setting, FAQ_SEARCH_FILE (tests/crag/config/test_providers.py registers it)."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import Field

from crag.core.access import Reader, may_read
from crag.config.env import EnvSettings
from crag.providers.llm.client import LlmClient
from crag.core.models import Chunk, GradedChunk
from crag.core.protocols import SearchBuild
from crag.retrieval.search.local_index import LocalIndex
from crag.config.engine_settings import CragSettings

USES_LOCAL_INDEX = False


class FaqSettings(EnvSettings):
    file: str = Field(default="", alias="FAQ_SEARCH_FILE")


class FaqRetriever:
    name = "faq-file"

    def __init__(self, entries: list[dict[str, str]]) -> None:
        self.chunks = [
            Chunk(id=f"faq-{i}", file="faq.json", title=e["q"], text=e["a"]) for i, e in enumerate(entries)
        ]

    async def search(
        self, query: str, top_k: int, question: str | None = None, reader: Reader | None = None
    ) -> list[GradedChunk]:
        words = set(query.lower().split())
        # With access trimming on, only what the reader may read, before the top k (an FAQ file
        # carries no permissions: its entries are unknown, denied by default).
        readable = self.chunks if reader is None else [c for c in self.chunks if may_read(c.allowed, reader)]
        hits = [(len(words & set(c.title.lower().split())), c) for c in readable]
        ranked = sorted((h for h in hits if h[0]), key=lambda h: -h[0])[:top_k]
        return [GradedChunk(chunk=c, retrieval_score=float(n)) for n, c in ranked]


def configured(settings: CragSettings) -> bool:
    return bool(FaqSettings().file)


def build(settings: CragSettings, index: LocalIndex | None, llm: LlmClient | None) -> SearchBuild:
    path = Path(FaqSettings().file)
    if not path.is_file():
        raise ValueError(f"FAQ_SEARCH_FILE not found: {path}")
    return SearchBuild(FaqRetriever(json.loads(path.read_text("utf-8"))))
