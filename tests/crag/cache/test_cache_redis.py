"""The answer cache in a real Redis (tests/servers/redis.py), shared by two engines over the same
documents as two instances of the bot would share it."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from crag.cache.answer_cache_redis import RedisAnswerCache
from crag.config.engine_settings import CragSettings
from crag.core.models import Branch, CragResult, Turn
from crag.engine import CragEngine
from crag.retrieval.search.local_index import LocalIndex
from crag.runtime.factory import build_engine, open_local_index
from hosting.redact import RedactingFilter, secret_values
from tests.servers.harness import free_port
from tests.servers.redis import RedisServer, running_redis

DOCS = {
    "shokudo.md": """# 社員食堂の案内

## 営業時間

社員食堂は本社ビル3階にあり、平日の11時30分から14時まで営業しています。
日替わり定食は450円で、社員証で支払えます。
""",
    "parking.txt": """Bicycle parking

Bicycle parking is in the basement, level B1. Register your bicycle with General Affairs to get a sticker.
""",
}
QUESTION = "Where is the bicycle parking?"


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    with running_redis() as server:
        yield server


@pytest.fixture
async def redis_client(redis_server: RedisServer) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_server.url)
    yield client
    await client.aclose()


@pytest.fixture
def prefix() -> str:
    """Each test its own keys on the shared server."""
    return f"test:{uuid.uuid4().hex[:8]}:"


def _docs(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    for name, text in files.items():
        (root / name).write_text(text, "utf-8")
    return root


def _instance(
    root: Path, url: str, prefix: str, ttl: float = 600.0, files: dict[str, str] | None = None, **env: str
) -> tuple[LocalIndex, CragEngine]:
    """One bot instance: its own copy of the documents at its own path, its own index folder."""
    docs = _docs(root / "docs", {**DOCS, **(files or {})})
    settings = CragSettings(
        CRAG_DOCS_DIR=str(docs),
        CRAG_INDEX_DIR=str(root / "index"),
        CRAG_CACHE_URL=url,
        CRAG_CACHE_PREFIX=prefix,
        CRAG_CACHE_TTL=str(ttl),
        CRAG_WEB="off",
        CRAG_EMBEDDINGS="off",
        CRAG_WORDS_ONLY_ANSWERS=True,  # no vectors here: words-only grades may answer
        **env,
    )
    index, _ = open_local_index(settings)
    return index, build_engine(settings, index)


def _redis(engine: CragEngine) -> RedisAnswerCache:
    assert isinstance(engine.cache, RedisAnswerCache)
    return engine.cache


async def test_an_answer_of_one_instance_is_a_hit_on_another(
    tmp_path: Path, redis_server: RedisServer, redis_client: aioredis.Redis, prefix: str
) -> None:
    index_a, engine_a = _instance(tmp_path / "a", redis_server.url, prefix)
    index_b, engine_b = _instance(tmp_path / "b", redis_server.url, prefix)
    try:
        # Same documents at different paths, indexed separately: the same version (a content fingerprint).
        assert index_a.version and index_a.version == index_b.version
        first = await engine_a.run(QUESTION)
        assert first.branch is Branch.CORRECT and "B1" in first.answer
        assert _redis(engine_a).stats.misses == 1
        assert len(await redis_client.keys(prefix + "*")) == 1

        hit = await engine_b.run("where is the  bicycle parking")
        assert _redis(engine_b).stats.hits == 1 and _redis(engine_b).stats.misses == 0
        assert hit.timings_ms == {"cache": 0.0, "total": 0.0}
        # The same answer, sources and citations, but its own id, time and the asker's wording.
        assert hit.answer == first.answer and hit.citations == first.citations
        assert hit.graded == first.graded and hit.branch is first.branch
        assert hit.id != first.id and hit.created_at > first.created_at
        assert hit.question == "where is the  bicycle parking"
        # A second hit gets yet another id.
        again = await engine_b.run(QUESTION)
        assert again.id not in (hit.id, first.id)
    finally:
        await engine_a.close()
        await engine_b.close()


async def test_entries_carry_the_cache_ttl_and_expire(
    tmp_path: Path, redis_server: RedisServer, redis_client: aioredis.Redis, prefix: str
) -> None:
    _, engine = _instance(tmp_path / "a", redis_server.url, prefix, ttl=600)
    _, short = _instance(tmp_path / "b", redis_server.url, prefix + "short:", ttl=0.3)
    try:
        await engine.run(QUESTION)
        (key,) = await redis_client.keys(prefix + "*")
        assert 0 < await redis_client.pttl(key) <= 600_000

        await short.run(QUESTION)
        (short_key,) = await redis_client.keys(prefix + "short:*")
        assert 0 < await redis_client.pttl(short_key) <= 300
        deadline = time.monotonic() + 30  # Redis forgets it; how soon does not matter here
        while await redis_client.exists(short_key) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        await short.run(QUESTION)
        assert _redis(short).stats.hits == 0 and _redis(short).stats.misses == 2
    finally:
        await engine.close()
        await short.close()


async def test_changed_documents_are_a_miss(tmp_path: Path, redis_server: RedisServer, prefix: str) -> None:
    index_a, engine_a = _instance(tmp_path / "a", redis_server.url, prefix)
    changed = {"parking.txt": DOCS["parking.txt"].replace("B1", "B2")}
    index_b, engine_b = _instance(tmp_path / "b", redis_server.url, prefix, files=changed)
    try:
        assert index_a.version != index_b.version
        await engine_a.run(QUESTION)
        answer = await engine_b.run(QUESTION)
        assert _redis(engine_b).stats.hits == 0 and "B2" in answer.answer
    finally:
        await engine_a.close()
        await engine_b.close()


def _result(question: str, notices: list[str] | None = None) -> CragResult:
    return CragResult(
        question=question, language="ja", branch=Branch.CORRECT, answer="20日 [1]", notices=notices or []
    )


async def test_follow_ups_scope_and_degraded_answers(
    redis_server: RedisServer, redis_client: aioredis.Redis, prefix: str
) -> None:
    version = ["v1"]
    cache = RedisAnswerCache.from_url(redis_server.url, 600, lambda: version[0], prefix)
    try:
        leave = [Turn(question="有給休暇は何日？")]
        await cache.put("それは？", leave, _result("それは？"))
        assert await cache.get("それは？", []) is None
        assert await cache.get("それは？", [Turn(question="経費は？")]) is None
        assert await cache.get("それは？", [Turn(question="有給休暇は何日")]) is not None
        # The scope keys by who may see what.
        assert await cache.get("それは？", leave, scope="group:sales") is None
        await cache.put("それは？", leave, _result("scoped"), scope="group:sales")
        scoped = await cache.get("それは？", leave, scope="group:sales")
        assert scoped is not None and scoped.question == "それは？"
        # A new index version: nothing of the old one is reachable.
        version[0] = "v2"
        assert await cache.get("それは？", leave) is None
        # Degraded answers are never written.
        keys = len(await redis_client.keys(prefix + "*"))
        await cache.put("q2", [], _result("q2", notices=["llm_fallback"]))
        assert len(await redis_client.keys(prefix + "*")) == keys
        assert await cache.get("q2", []) is None
        # An entry that is not a CragResult (another version of the bot wrote it): a miss.
        await redis_client.set(cache.key("q3", []), b'{"not": "a result"}')
        assert await cache.get("q3", []) is None
        await cache.clear()
        assert await redis_client.keys(prefix + "*") == []
    finally:
        await cache.close()


async def test_turns_are_answered_when_redis_dies(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    password = "s3cret-redis-pass"
    with running_redis(password) as server:
        _, engine = _instance(tmp_path / "a", server.url, "crag:answer:")
        try:
            first = await engine.run(QUESTION)
            assert (await engine.run(QUESTION)).answer == first.answer
            assert _redis(engine).stats.hits == 1  # the password was accepted
            server.stop()
            with caplog.at_level(logging.WARNING, logger="crag.cache.answer_cache_redis"):
                for _ in range(5):
                    answer = await engine.run(QUESTION)
                    assert answer.answer == first.answer and not answer.notices
            stats = _redis(engine).stats
            assert stats.hits == 1 and stats.errors >= 5
            assert "Redis read failed" in caplog.text and password not in caplog.text
        finally:
            await engine.close()


async def test_a_redis_that_never_answers_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that accepts and stays silent: each call gives up after the timeout, and after a
    few failures the breaker stops calling it at all."""
    connections = 0

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await reader.read()  # until the client hangs up
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", free_port())
    port = server.sockets[0].getsockname()[1]
    url = f"redis://127.0.0.1:{port}/0"
    _, engine = _instance(tmp_path / "a", url, "crag:answer:", CRAG_CACHE_TIMEOUT="0.2")
    try:
        with caplog.at_level(logging.WARNING, logger="crag.cache.answer_cache_redis"):
            for _ in range(2):
                answer = await engine.run(QUESTION)
                assert "B1" in answer.answer
            assert "TimeoutError" in caplog.text and connections >= 1
            seen = connections
            for _ in range(3):
                assert "B1" in (await engine.run(QUESTION)).answer
        assert connections == seen  # the breaker is open: Redis is not called
        assert _redis(engine).stats.hits == 0
    finally:
        await engine.close()
        server.close()
        await server.wait_closed()


def test_a_bad_url_is_refused_without_showing_it() -> None:
    with pytest.raises(ValueError, match="CRAG_CACHE_URL") as error:
        RedisAnswerCache.from_url("http://:topsecretpw@cache:6379", 600, lambda: "")
    assert "topsecretpw" not in str(error.value)


def test_the_url_is_a_secret_the_log_filter_masks() -> None:
    url = "redis://:topsecretpw@cache.internal:6380/2"
    settings = CragSettings(CRAG_CACHE_URL=url)
    assert url not in repr(settings) and url in secret_values(settings)
    assert "topsecretpw" not in RedactingFilter(secret_values(settings)).redact(f"connecting to {url}")
