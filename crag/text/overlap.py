"""IDF-weighted term overlap: how much of a question's information a piece of text contains."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise

from crag.text.tokenize import Word


@dataclass(frozen=True)
class WeightedQuery:
    weights: dict[str, float]  # unique question term -> idf weight
    total: float
    # Question term -> its translations into the other language (crag/text/bilingual.py), each the
    # terms that must all be present: a passage in the other language holding one has the term.
    alternatives: Mapping[str, tuple[tuple[str, ...], ...]] = field(default_factory=dict)

    def coverage(self, present: set[str] | frozenset[str]) -> float:
        """Share of the question's idf mass found among `present` terms, 0.0-1.0."""
        if self.total <= 0:
            return 0.0
        return sum(w for t, w in self.weights.items() if self.found(t, present)) / self.total

    def found(self, term: str, present: set[str] | frozenset[str]) -> bool:
        """The term, or one of its translations, is among `present`."""
        if term in present:
            return True
        return any(all(x in present for x in alt) for alt in self.alternatives.get(term, ()))

    def phrase_coverage(self, *pairs: frozenset[tuple[str, str]]) -> float:
        """Weighted share of the question's consecutive term pairs standing together in one of the
        texts whose term_pairs are given: 「受付時間」 asked is found in 「受付時間：平日9:00〜」, not in
        「受付から5営業日」 beside 「1時間以内」."""
        total = hit = 0.0
        for a, b in pairwise(self.weights):
            weight = self.weights[a] + self.weights[b]
            total += weight
            if any(term_pair(a, b) in found for found in pairs):
                hit += weight
        return hit / total if total > 0 else 0.0

    def with_alternatives(self, alternatives: Mapping[str, tuple[tuple[str, ...], ...]]) -> WeightedQuery:
        return replace(self, alternatives={t: a for t, a in alternatives.items() if t in self.weights})

    def __bool__(self) -> bool:
        return bool(self.weights)


# How much a word of each kind says about what a question is about: names the most, verbs and
# adjectives (often paraphrased between question and document) less, affixes least.
KIND_WEIGHT: dict[str, float] = {
    "proper": 1.3,
    "noun": 1.0,
    "number": 1.0,
    "latin": 1.0,
    "predicate": 0.6,
    "affix": 0.5,
}


def general_weight(zipf: float) -> float:
    """1.2 for rare words (Zipf <= 2.7) down to 0.3 for the most common (Zipf >= 6.3)."""
    return min(1.2, max(0.3, (7.5 - zipf) / 4.0))


def term_pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def term_pairs(terms: Sequence[str]) -> frozenset[tuple[str, str]]:
    """The text's terms at most two apart, in either order: its phrases, as pairs of terms."""
    return frozenset(term_pair(a, b) for i, a in enumerate(terms) for b in terms[i + 1 : i + 3] if a != b)


def weighted_query(words: Iterable[Word], idf: Callable[[str], float]) -> WeightedQuery:
    weights: dict[str, float] = {}
    for w in words:
        weight = idf(w.term) * KIND_WEIGHT.get(w.kind, 1.0) * general_weight(w.zipf)
        weights[w.term] = max(weights.get(w.term, 0.0), weight)
    return WeightedQuery(weights, sum(weights.values()))
