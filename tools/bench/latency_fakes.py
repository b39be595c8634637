"""The test fakes with realistic latency: OpenAI (per call, optionally per token), Azure AI Search
and SerpAPI. Loopback only; used by the benchmarks."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from crag.eval.fixture_web import FakeSerpApi
from tests.fakes.azure_search import FakeAzureSearch
from tests.fakes.openai_api import FakeOpenAI


class SlowOpenAI(FakeOpenAI):
    def __init__(self, latency_ms: float = 300.0, per_token_ms: float = 0.0) -> None:
        super().__init__()
        self.latency_ms = latency_ms
        self.per_token_ms = per_token_ms

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
        # Output length is what costs time per token; assume replies use a fifth of their budget.
        await asyncio.sleep((self.latency_ms + self.per_token_ms * tokens / 5) / 1000)
        return await super()._chat(request)

    async def _embeddings(self, request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(self.latency_ms / 1000)
        return await super()._embeddings(request)


class SlowSerpApi(FakeSerpApi):
    def __init__(self, fixtures: dict[str, dict[str, Any]], latency_ms: float = 500.0) -> None:
        super().__init__(fixtures)
        self.latency_ms = latency_ms

    async def _search(self, request: web.Request) -> web.Response:
        await asyncio.sleep(self.latency_ms / 1000)
        return await super()._search(request)


__all__ = ["FakeAzureSearch", "SlowOpenAI", "SlowSerpApi"]
