"""Limits every replica counts together (hosting/shared_limits.py), on a real redis-server: three
Web Chat apps (three replicas behind one proxy) share one client's token limit, and the admin
sign-in failures of one client add up across replicas. Counted in memory, the same requests pass on
every replica (the control below). When Redis fails, each replica falls back to its own memory:
no 5xx, and the limit still holds per replica."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack

import pytest
import redis.asyncio as aioredis

from admin.authorization import FailureLimit
from hosting.app_settings import BotSettings
from hosting.shared_limits import SharedFailureLimit, limits_client
from tests.servers.redis import RedisServer, running_redis
from tests.servers.webchat_harness import Harness, webchat_app
from tests.webchat.test_webchat_token import SECRET, FakeTokenService

PROXY = {"CRAG_TRUSTED_PROXIES": "127.0.0.1"}  # the test client stands for the proxy in front
CLIENT = {"X-Forwarded-For": "203.0.113.7"}
OTHER = {"X-Forwarded-For": "198.51.100.20"}


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    with running_redis() as server:
        yield server


@pytest.fixture
async def directline() -> AsyncIterator[FakeTokenService]:
    fake = FakeTokenService()
    await fake.start()
    yield fake
    await fake.stop()


def _client(url: str) -> aioredis.Redis:
    client = limits_client(BotSettings.model_validate({"CRAG_CACHE_URL": url}))
    assert client is not None
    return client


async def _replicas(
    stack: AsyncExitStack, url: str, shared: bool, directline: FakeTokenService
) -> list[Harness]:
    replicas = []
    for _ in range(3):
        client = _client(url) if shared else None  # each replica its own connection, as in production
        if client is not None:
            stack.push_async_callback(client.aclose)
        replicas.append(
            await stack.enter_async_context(
                webchat_app(
                    shared=client,
                    DIRECT_LINE_SECRET=SECRET,
                    DIRECT_LINE_ENDPOINT=directline.url,
                    WEBCHAT_TOKENS_PER_MINUTE=3,
                    **PROXY,
                )
            )
        )
    return replicas


async def test_one_client_over_the_token_limit_is_refused_on_every_replica(
    redis_server: RedisServer, directline: FakeTokenService
) -> None:
    async with aioredis.Redis.from_url(redis_server.url) as fresh:
        await fresh.flushdb()
    async with AsyncExitStack() as stack:
        replicas = await _replicas(stack, redis_server.url, True, directline)
        # The burst (3) spent one request on each replica...
        for replica in replicas:
            assert (await replica.client.post("/api/directline/token", headers=CLIENT)).status == 200
        # ...so the next one is refused wherever it lands, with the wait Redis worked out.
        for replica in replicas:
            refused = await replica.client.post("/api/directline/token", headers=CLIENT)
            assert refused.status == 429 and 1 <= int(refused.headers["Retry-After"]) <= 20
        # Another client has its own bucket.
        assert (await replicas[2].client.post("/api/directline/token", headers=OTHER)).status == 200
        assert len(directline.calls) == 4  # refused requests cost Direct Line nothing


async def test_counted_in_memory_each_replica_would_allow_the_limit_again(
    redis_server: RedisServer, directline: FakeTokenService
) -> None:
    """The control: without Redis, three replicas allow three times the limit."""
    async with AsyncExitStack() as stack:
        replicas = await _replicas(stack, redis_server.url, False, directline)
        statuses = [
            (await r.client.post("/api/directline/token", headers=CLIENT)).status
            for r in replicas
            for _ in range(3)
        ]
        assert statuses == [200] * 9


async def test_admin_sign_in_failures_add_up_across_replicas(redis_server: RedisServer) -> None:
    clients = [_client(redis_server.url) for _ in range(3)]
    try:
        limits = [
            SharedFailureLimit("admin-sign-in-test", FailureLimit(limit=3, window=60), c) for c in clients
        ]
        assert all(limit.shared for limit in limits)
        for limit in limits:  # one wrong key on each replica
            assert await limit.blocked("203.0.113.7") == 0
            await limit.failed("203.0.113.7")
        for limit in limits:
            wait = await limit.blocked("203.0.113.7")
            assert 59 <= wait <= 60
        assert await limits[0].blocked("198.51.100.20") == 0
        # Each replica's memory saw one failure only: without Redis none would block.
        assert all(limit.memory.blocked("203.0.113.7") == 0 for limit in limits)
    finally:
        for c in clients:
            await c.aclose()


async def test_when_redis_fails_each_replica_limits_alone_without_an_error(
    caplog: pytest.LogCaptureFixture, directline: FakeTokenService
) -> None:
    with running_redis() as doomed:
        url = doomed.url
        async with AsyncExitStack() as stack:
            replicas = await _replicas(stack, url, True, directline)
            doomed.stop()
            with caplog.at_level(logging.WARNING, logger="hosting.shared_limits"):
                statuses = [
                    (await replicas[0].client.post("/api/directline/token", headers=CLIENT)).status
                    for _ in range(4)
                ]
            assert statuses == [200, 200, 200, 429]  # this replica's own bucket
            warnings = [r.getMessage() for r in caplog.records if r.name == "hosting.shared_limits"]
            assert len(warnings) == 1 and "counts alone" in warnings[0]
            client = _client(url)
            stack.push_async_callback(client.aclose)
            limit = SharedFailureLimit("admin-sign-in-test", FailureLimit(limit=1, window=60), client)
            await limit.failed("203.0.113.7")  # no exception: counted in memory
            assert await limit.blocked("203.0.113.7") > 0
