"""Token buckets per key (client IP, conversation): small bursts pass, floods get 429 + Retry-After."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

Clock = Callable[[], float]


@dataclass
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    """`rate` requests per second on average per key, at most `burst` in a row.

    Buckets live in memory; full buckets are dropped when many keys are tracked, so a flood of
    distinct keys cannot grow the map without bound (a full bucket is the same as no bucket).
    """

    def __init__(
        self, rate: float, burst: int, clock: Clock = time.monotonic, max_keys: int = 10_000
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("rate must be > 0 and burst >= 1")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._max_keys = max_keys
        self._buckets: dict[str, _Bucket] = {}

    def acquire(self, key: str) -> float:
        """Take one token for `key`: 0.0 when allowed, else the seconds until one is available."""
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= self._max_keys:
                self._prune(now)
            bucket = self._buckets[key] = _Bucket(float(self.burst), now)
        else:
            bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.updated) * self.rate)
            bucket.updated = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / self.rate

    def _prune(self, now: float) -> None:
        full = [k for k, b in self._buckets.items() if b.tokens + (now - b.updated) * self.rate >= self.burst]
        for key in full:
            del self._buckets[key]
        if len(self._buckets) >= self._max_keys:
            # Everyone is mid-burst: forget the oldest half rather than refuse new clients forever.
            oldest = sorted(self._buckets, key=lambda k: self._buckets[k].updated)
            for key in oldest[: len(oldest) // 2]:
                del self._buckets[key]
