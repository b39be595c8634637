"""A circuit breaker: after repeated failures a provider is skipped for a while, so a dead service
costs each turn nothing instead of a timeout (its fallback answers at once), then is tried again."""

from __future__ import annotations

import time
from collections.abc import Callable


class CircuitBreaker:
    def __init__(
        self, failures: int = 5, cooldown_s: float = 30.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._threshold = failures
        self._cooldown = cooldown_s
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None

    @property
    def open(self) -> bool:
        return self._opened_at is not None and self._clock() - self._opened_at < self._cooldown

    def allow(self) -> bool:
        """False while open; after the cooldown one trial call goes through (half-open)."""
        if self._opened_at is None:
            return True
        if self._clock() - self._opened_at >= self._cooldown:
            self._opened_at = self._clock()  # the trial call: further calls wait for its outcome
            return True
        return False

    def success(self) -> None:
        self._failures = 0
        self._opened_at = None

    def failure(self) -> None:
        self._failures += 1
        if self._failures >= self._threshold:
            self._opened_at = self._clock()
