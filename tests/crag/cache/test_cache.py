"""The in-memory answer cache: normalized keys, TTL, index version, follow-ups, scope, degraded answers."""

from __future__ import annotations

from crag.cache.answer_cache import MemoryAnswerCache, normalize_question
from crag.core.models import Branch, CragResult, Turn


def _result(question: str = "有給休暇は何日？", notices: list[str] | None = None) -> CragResult:
    return CragResult(
        question=question, language="ja", branch=Branch.CORRECT, answer="20日 [1]", notices=notices or []
    )


def test_normalization() -> None:
    assert normalize_question("  有給休暇は　何日？ ") == normalize_question("有給休暇は 何日")
    assert normalize_question("How MANY days?") == "how many days"


async def test_hit_is_a_copy_with_a_new_id() -> None:
    cache = MemoryAnswerCache()
    original = _result()
    await cache.put(original.question, [], original)
    hit = await cache.get("有給休暇は何日", [])
    assert hit is not None and hit.answer == original.answer
    assert hit.id != original.id  # feedback on the copy never lands on the original
    assert cache.stats.hits == 1 and cache.stats.misses == 0
    assert await cache.get("経費の締め切りは？", []) is None and cache.stats.misses == 1
    assert cache.stats.hit_rate == 0.5


async def test_ttl_and_index_version() -> None:
    now = [0.0]
    version = ["v1"]
    cache = MemoryAnswerCache(ttl_s=60, version=lambda: version[0], clock=lambda: now[0])
    await cache.put("q", [], _result("q"))
    now[0] = 30
    assert await cache.get("q", []) is not None
    version[0] = "v2"  # re-ingested documents: old answers are unreachable
    assert await cache.get("q", []) is None
    version[0] = "v1"
    now[0] = 61
    assert await cache.get("q", []) is None  # expired


async def test_follow_ups_and_degraded_answers() -> None:
    cache = MemoryAnswerCache()
    await cache.put("それは？", [Turn(question="有給休暇は何日？")], _result("それは？"))
    assert await cache.get("それは？", []) is None
    assert await cache.get("それは？", [Turn(question="経費は？")]) is None
    assert await cache.get("それは？", [Turn(question="有給休暇は何日？")]) is not None
    await cache.put("q2", [], _result("q2", notices=["llm_fallback"]))
    assert await cache.get("q2", []) is None


async def test_size_bound() -> None:
    cache = MemoryAnswerCache(max_entries=2)
    for q in ("a", "b", "c"):
        await cache.put(q, [], _result(q))
    assert cache.entries == 2 and await cache.get("a", []) is None and await cache.get("c", []) is not None


async def test_scope_separates_entries() -> None:
    cache = MemoryAnswerCache()
    await cache.put("q", [], _result("q"), scope="hr")
    assert await cache.get("q", [], scope="sales") is None
    assert await cache.get("q", []) is None
    assert await cache.get("q", [], scope="hr") is not None
