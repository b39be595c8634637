"""An answer cache: the same question (after normalization) within a TTL gets the same answer,
until the document index changes.

Keys hold the index version, so a re-ingest makes every old entry unreachable; the previous
question is part of the key, so a follow-up is not confused with the same words asked afresh.
Degraded answers (a provider failed) are not cached: the next asker deserves a fresh try.
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

from crag.models import CragResult, Turn

_TRAILING = re.compile(r"[\s?？!！。.、,，]+$")


def normalize_question(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    return _TRAILING.sub("", " ".join(text.split()))


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


class AnswerCache:
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
        self._entries: OrderedDict[tuple[str, str, str], tuple[float, CragResult]] = OrderedDict()
        self.stats = CacheStats()

    def key(self, question: str, history: Sequence[Turn]) -> tuple[str, str, str]:
        previous = normalize_question(history[-1].question) if history else ""
        return (self._version(), normalize_question(question), previous)

    def get(self, question: str, history: Sequence[Turn]) -> CragResult | None:
        key = self.key(question, history)
        entry = self._entries.get(key)
        if entry is None or self._clock() - entry[0] > self._ttl:
            if entry is not None:
                del self._entries[key]
            self.stats.misses += 1
            return None
        self._entries.move_to_end(key)
        self.stats.hits += 1
        # A new answer id: feedback on this reply must not land on the original asker's answer.
        return entry[1].model_copy(
            deep=True,
            update={"id": uuid.uuid4().hex, "created_at": datetime.now(UTC), "question": question},
        )

    def put(self, question: str, history: Sequence[Turn], result: CragResult) -> None:
        if result.notices or self._max <= 0:
            return
        self._entries[self.key(question, history)] = (self._clock(), result.model_copy(deep=True))
        self._entries.move_to_end(self.key(question, history))
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
