"""Limits every replica counts together: the Web Chat token requests per client and the admin
sign-in failures per client, kept in Redis when CRAG_CACHE_URL names one (memory otherwise).

In memory, N replicas behind a load balancer would allow N times the limit, and a guesser would
just be sent round the replicas. In Redis each check is one Lua script, so replicas racing on one
client never both take the last token; time is the Redis server's own (TIME), so replicas whose
clocks differ still agree. When Redis fails the check falls back to this replica's memory limiter
(logged, at most once a minute): a cache outage must neither refuse everyone (a 5xx) nor lift
the limits altogether.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

import redis.asyncio as aioredis
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.retry import Retry

from crag.config.engine_settings import CragSettings
from crag.outbound.redis_connect import redis_client

log = logging.getLogger(__name__)

PREFIX = "crag:limit:"
_WARN_EVERY = 60.0  # seconds between two log lines about Redis failing

# Token bucket: ARGV rate (tokens a second), burst. Returns the wait in seconds, as text (Lua numbers
# come back as integers otherwise).
_BUCKET = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'updated')
local tokens = tonumber(state[1])
local updated = tonumber(state[2])
if tokens == nil then
  tokens = burst
  updated = now
end
tokens = math.min(burst, tokens + math.max(0, now - updated) * rate)
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'updated', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(burst / rate) + 1)
return tostring(wait)
"""

# Sliding window of failures: ARGV limit, window (s), and whether to record one now ('1') or only
# check ('0'). Returns the seconds until the client may try again ('0': now).
_FAILURES = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if ARGV[3] == '1' then
  redis.call('ZADD', KEYS[1], now, t[1] .. '.' .. t[2] .. '.' .. redis.call('INCR', KEYS[1] .. ':n'))
  redis.call('EXPIRE', KEYS[1], math.ceil(window) + 1)
  redis.call('EXPIRE', KEYS[1] .. ':n', math.ceil(window) + 1)
  local excess = redis.call('ZCARD', KEYS[1]) - limit
  if excess > 0 then
    redis.call('ZREMRANGEBYRANK', KEYS[1], 0, excess - 1)
  end
  return '0'
end
if redis.call('ZCARD', KEYS[1]) < limit then
  return '0'
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return tostring(math.max(0, window - (now - tonumber(oldest[2]))))
"""


def limits_client(settings: CragSettings, timeout_s: float = 0.5) -> aioredis.Redis | None:
    """The Redis the limits are shared through: the answer cache's (CRAG_CACHE_URL, CRAG_REDIS_AUTH),
    or None (memory). Connects on first use; no retries: a request must not wait on a dead cache."""
    url = settings.cache_url.get_secret_value()
    if not url:
        return None
    return redis_client(
        url,
        settings.redis_auth,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=Retry(NoBackoff(), 0),
    )


class MemoryRate(Protocol):
    rate: float
    burst: int

    def acquire(self, key: str) -> float: ...


class MemoryFailures(Protocol):
    limit: int
    window: float

    def blocked(self, client: str) -> float: ...

    def failed(self, client: str) -> None: ...


class _Fallback:
    def __init__(self, what: str) -> None:
        self._what = what
        self._warned = -_WARN_EVERY

    def failed(self, exc: BaseException) -> None:
        now = time.monotonic()
        if now - self._warned >= _WARN_EVERY:
            self._warned = now
            log.warning(
                "%s: Redis failed (%s); this replica counts alone for now", self._what, type(exc).__name__
            )


class SharedRateLimit:
    """`acquire(key)`: 0.0 when allowed, else the seconds until a request would be."""

    def __init__(self, name: str, memory: MemoryRate, client: aioredis.Redis | None = None) -> None:
        self.name = name
        self.memory = memory
        self._fallback = _Fallback(f"rate limit {name}")
        self._script = client.register_script(_BUCKET) if client is not None else None

    @property
    def shared(self) -> bool:
        return self._script is not None

    async def acquire(self, key: str) -> float:
        if self._script is None:
            return self.memory.acquire(key)
        try:
            wait = await self._script(
                keys=[f"{PREFIX}{self.name}:{key}"], args=[self.memory.rate, self.memory.burst]
            )
        except (RedisError, OSError) as exc:
            self._fallback.failed(exc)
            return self.memory.acquire(key)
        return float(wait)


class SharedFailureLimit:
    """`blocked(client)`: seconds until it may try again (0.0: now); `failed(client)` counts one."""

    def __init__(self, name: str, memory: MemoryFailures, client: aioredis.Redis | None = None) -> None:
        self.name = name
        self.memory = memory
        self._fallback = _Fallback(f"failure limit {name}")
        self._script = client.register_script(_FAILURES) if client is not None else None

    @property
    def shared(self) -> bool:
        return self._script is not None

    async def _run(self, client: str, record: bool) -> float:
        assert self._script is not None
        args = [self.memory.limit, self.memory.window, "1" if record else "0"]
        return float(await self._script(keys=[f"{PREFIX}{self.name}:{client}"], args=args))

    async def blocked(self, client: str) -> float:
        if self._script is None:
            return self.memory.blocked(client)
        try:
            return await self._run(client, record=False)
        except (RedisError, OSError) as exc:
            self._fallback.failed(exc)
            return self.memory.blocked(client)

    async def failed(self, client: str) -> None:
        # Counted in memory too: should Redis fail next, this replica still knows what it saw.
        self.memory.failed(client)
        if self._script is None:
            return
        try:
            await self._run(client, record=True)
        except (RedisError, OSError) as exc:
            self._fallback.failed(exc)
