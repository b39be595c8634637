"""The circuit breaker, and a dead document index skipped after repeated failures."""

from __future__ import annotations

from pathlib import Path

from crag.config.engine_settings import CragSettings
from crag.core.access import Reader
from crag.core.models import GradedChunk
from crag.engine import CragEngine
from crag.outbound.breaker import CircuitBreaker
from crag.runtime.factory import build_engine, open_local_index
from tests.paths import SAMPLE_DOCS


def test_opens_after_failures_and_half_opens_after_cooldown() -> None:
    now = [0.0]
    breaker = CircuitBreaker(failures=3, cooldown_s=10, clock=lambda: now[0])
    for _ in range(2):
        breaker.failure()
    assert breaker.allow()
    breaker.failure()
    assert breaker.open and not breaker.allow()
    now[0] = 10
    assert breaker.allow()  # one trial call
    assert not breaker.allow()  # the others wait for it
    breaker.success()
    assert not breaker.open and breaker.allow()


class _DeadRetriever:
    name = "dead"

    def __init__(self) -> None:
        self.calls = 0

    async def search(
        self, query: str, top_k: int, question: str | None = None, reader: Reader | None = None
    ) -> list[GradedChunk]:
        self.calls += 1
        raise ConnectionError("index unreachable")


async def test_dead_index_is_skipped_after_repeated_failures(tmp_path: Path) -> None:
    settings = CragSettings(
        CRAG_DOCS_DIR=str(SAMPLE_DOCS), CRAG_INDEX_DIR=str(tmp_path / "i"), CRAG_CACHE_TTL=0
    )
    base = build_engine(settings, open_local_index(settings)[0])
    dead = _DeadRetriever()
    engine = CragEngine(base.rewriter, dead, base.grader, base.web, base.generator, base.config)
    for i in range(8):
        result = await engine.run(f"question {i}?")
        assert result.notices == ["search_failed"] and result.graded == []
    assert dead.calls == 5  # then the breaker stopped calling it
