"""The answer cache in Redis, shared by every instance of the bot: an answer one instance wrote is
a hit on the others for the same documents (the local index's version is a fingerprint of their
content, the same on every instance).

A key is a prefix and a hash of crag.cache.answer_cache.cache_key; the value is the CragResult as
JSON, and Redis
expires it after the cache TTL. Redis is an optimisation, never a dependency of the answer: a
failing, slow or unreachable Redis is a miss (a warning in the log), each call bounded by a short
timeout, and after a few failures in a row a circuit breaker skips Redis for a while, so a dead
Redis costs the turns nothing. The URL may hold a password: it is never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Sequence

import redis.asyncio as aioredis
from pydantic import ValidationError
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from crag.cache.answer_cache import CacheStats, cache_key, cacheable, served_copy
from crag.core.models import CragResult, Turn
from crag.outbound.breaker import CircuitBreaker
from crag.outbound.redis_connect import RedisAuth, close_client, redis_client

log = logging.getLogger(__name__)

DEFAULT_PREFIX = "crag:answer:"
# Failures that mean "Redis is not there (or not well)": a miss, never an error of the turn.
_UNAVAILABLE = (RedisError, OSError, TimeoutError)


class RedisAnswerCache:
    backend = "redis"

    def __init__(
        self,
        client: aioredis.Redis,
        ttl_s: float = 600.0,
        version: Callable[[], str] = lambda: "",
        prefix: str = DEFAULT_PREFIX,
        timeout_s: float = 0.25,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        self._client = client
        self._ttl_ms = max(1, round(ttl_s * 1000))
        self._version = version
        self._prefix = prefix
        self._timeout = timeout_s
        self._breaker = breaker or CircuitBreaker(failures=3, cooldown_s=30.0)
        self.stats = CacheStats()

    @classmethod
    def from_url(
        cls,
        url: str,
        ttl_s: float,
        version: Callable[[], str],
        prefix: str = DEFAULT_PREFIX,
        timeout_s: float = 0.25,
        auth: RedisAuth = "url",
    ) -> RedisAnswerCache:
        """A client that connects on first use (building it contacts nothing). No retries: redis-py
        retries three times with backoff by default, seconds a turn must not wait for a cache."""
        client = redis_client(
            url,
            auth,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            retry=Retry(NoBackoff(), 0),
        )
        return cls(client, ttl_s, version, prefix, timeout_s)

    def key(self, question: str, history: Sequence[Turn], scope: str = "") -> str:
        parts = cache_key(self._version(), question, history, scope)
        digest = hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()
        return self._prefix + digest

    async def get(self, question: str, history: Sequence[Turn], scope: str = "") -> CragResult | None:
        key = self.key(question, history, scope)
        raw = await self._call("read", lambda: self._client.get(key))
        result = None
        if isinstance(raw, bytes | str):
            try:
                result = CragResult.model_validate_json(raw)
            except ValidationError:
                # Written by another version of the bot, say during a rolling deploy: a miss.
                log.warning("answer cache: an entry that is not a CragResult of this version; ignored")
        if result is None:
            self.stats.misses += 1
            return None
        self.stats.hits += 1
        return served_copy(result, question)

    async def put(self, question: str, history: Sequence[Turn], result: CragResult, scope: str = "") -> None:
        if cacheable(result):
            key = self.key(question, history, scope)
            value = result.model_dump_json()
            await self._call("write", lambda: self._client.set(key, value, px=self._ttl_ms))

    async def clear(self) -> None:
        """Forget every answer under this cache's prefix (every instance's, every index version's)."""

        async def delete_all() -> None:
            async for key in self._client.scan_iter(match=self._prefix + "*", count=500):
                await self._client.delete(key)

        await self._call("clear", delete_all, timeout_s=max(self._timeout, 10.0))

    async def close(self) -> None:
        with contextlib.suppress(*_UNAVAILABLE):
            await close_client(self._client)

    @property
    def entries(self) -> None:
        return None  # shared with other instances; counting would mean scanning Redis

    async def _call(
        self, what: str, call: Callable[[], Awaitable[object]], timeout_s: float | None = None
    ) -> object:
        """call's result, or None when Redis fails, is slow, or is being skipped after failures."""
        if not self._breaker.allow():
            self.stats.errors += 1
            return None
        try:
            async with asyncio.timeout(timeout_s or self._timeout):
                value = await call()
        except _UNAVAILABLE as exc:
            self.stats.errors += 1
            self._breaker.failure()
            # The class and message only: redis-py's messages name host and port, never the password.
            log.warning(
                "answer cache: Redis %s failed (%s: %s); answering without it", what, type(exc).__name__, exc
            )
            return None
        self._breaker.success()
        return value
