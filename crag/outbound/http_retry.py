"""The two numbers every retrying HTTP client here needs: how long to back off, and how long the
server asked us to wait (Retry-After, or Azure OpenAI's retry-after-ms)."""

from __future__ import annotations

import random
from collections.abc import Mapping


def backoff(attempt: int, initial: float, ceiling: float) -> float:
    """Exponential from `initial` (attempt 0), capped at `ceiling`, less up to a quarter at random so
    that clients failed together do not come back together."""
    return min(initial * 2.0**attempt, ceiling) * (1 - 0.25 * random.random())


def retry_after(headers: Mapping[str, str], limit: float) -> float | None:
    """The wait the server asked for, in seconds, when it is a number of seconds up to `limit`
    (an HTTP date, or a longer wait, is not honoured: the caller backs off instead)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue
        if 0 <= seconds <= limit:
            return seconds
    return None
