"""Term statistics the local grader and composer need, and a flat stand-in when no local index exists."""

from __future__ import annotations

from typing import Protocol

from crag.text.tokenize import TermExtractor, Word


class TermStats(Protocol):
    def idf(self, term: str) -> float: ...

    def terms(self, text: str) -> list[str]: ...

    def words(self, text: str) -> list[Word]: ...


class FlatStats:
    """Every term equally informative (idf 1.0) for a corpus this process cannot see (a remote index):
    word kind and general-language rarity still tell names from everyday words."""

    def __init__(self, extractor: TermExtractor) -> None:
        self.terms = extractor.terms
        self.words = extractor.analyze

    def idf(self, term: str) -> float:
        return 1.0
