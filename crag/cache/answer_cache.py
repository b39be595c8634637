"""The answer cache: the same question (after normalization) within a TTL gets the same answer,
until the document index changes.

Keys hold the index version, so a re-ingest makes every old entry unreachable; the previous
question is part of the key, so a follow-up is not confused with the same words asked afresh; and
a `scope` stands for who may see what (with access trimming, a digest of the asker's principals:
crag/core/access.py `scope`; "" without), so that answers trimmed to one permission set are never
served to another. Degraded answers (a provider failed) are not
cached: the next asker deserves a fresh try.

`AnswerCache` is what the engine awaits; `MemoryAnswerCache` (here, the default: one process, no
setup) and `RedisAnswerCache` (crag/cache/answer_cache_redis.py: shared by every instance of the bot) keep it.
crag/runtime/factory.py chooses one from the settings.
"""

from __future__ import annotations

import re
import time
import unicodedata
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from crag.core.models import CragResult, Turn

_TRAILING = re.compile(r"[\s?？!！。.、,，]+$")


def normalize_question(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    return _TRAILING.sub("", " ".join(text.split()))


def cache_key(version: str, question: str, history: Sequence[Turn], scope: str) -> tuple[str, str, str, str]:
    """What tells two askings apart: the index version, the question and the one it follows
    (normalized), and the scope."""
    previous = normalize_question(history[-1].question) if history else ""
    return (version, normalize_question(question), previous, scope)


def cacheable(result: CragResult) -> bool:
    return not result.notices


def served_copy(result: CragResult, question: str) -> CragResult:
    """A hit as the asker gets it: a new answer id (feedback on this reply must not land on the
    original asker's answer), a new time, and the asker's own wording of the question."""
    return result.model_copy(
        deep=True,
        update={"id": uuid.uuid4().hex, "created_at": datetime.now(UTC), "question": question},
    )


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    errors: int = 0  # the cache's store could not be reached (counted as misses too)

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


class AnswerCache(Protocol):
    backend: str  # "memory" or "redis", for /api/health
    stats: CacheStats

    async def get(self, question: str, history: Sequence[Turn], scope: str = "") -> CragResult | None:
        """A copy of the cached answer (see served_copy), or None. Never raises."""
        ...

    async def put(self, question: str, history: Sequence[Turn], result: CragResult, scope: str = "") -> None:
        """Keep the answer unless it is degraded. Never raises."""
        ...

    async def clear(self) -> None: ...

    async def close(self) -> None: ...

    @property
    def entries(self) -> int | None:
        """Entries held, when the cache can tell cheaply (None for a shared store)."""
        ...


class MemoryAnswerCache:
    """One process's cache: an LRU bounded by max_entries, entries expiring after ttl_s."""

    backend = "memory"

    def __init__(
        self,
        ttl_s: float = 600.0,
        max_entries: int = 1000,
        version: Callable[[], str] = lambda: "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl = ttl_s
        self._max = max_entries
        self._version = version
        self._clock = clock
        self._entries: OrderedDict[tuple[str, str, str, str], tuple[float, CragResult]] = OrderedDict()
        self.stats = CacheStats()

    async def get(self, question: str, history: Sequence[Turn], scope: str = "") -> CragResult | None:
        key = cache_key(self._version(), question, history, scope)
        entry = self._entries.get(key)
        if entry is None or self._clock() - entry[0] > self._ttl:
            if entry is not None:
                del self._entries[key]
            self.stats.misses += 1
            return None
        self._entries.move_to_end(key)
        self.stats.hits += 1
        return served_copy(entry[1], question)

    async def put(self, question: str, history: Sequence[Turn], result: CragResult, scope: str = "") -> None:
        if not cacheable(result) or self._max <= 0:
            return
        key = cache_key(self._version(), question, history, scope)
        self._entries[key] = (self._clock(), result.model_copy(deep=True))
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    async def clear(self) -> None:
        self._entries.clear()

    async def close(self) -> None:
        pass

    @property
    def entries(self) -> int:
        return len(self._entries)
