"""Lexical evidence that a chunk answers a question, as a handful of numeric features.

A term of the question counts as found in a piece of text when the text has the same term, or,
failing that, a near form: an English word sharing its first letters (Californian ~ California,
septicemia ~ septicemic, typos past the fifth letter) or a Japanese term occurring inside the text
even though the tokenizer cut it differently (排気 in 排気ガス). Near forms count 0.8.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from crag.text.nfkc import nfkc
from crag.text.overlap import WeightedQuery, term_pairs
from crag.text.question import has_number

NEAR_MATCH = 0.8
_LATIN = re.compile(r"^[0-9a-z]")
_WORDS = re.compile(r"[0-9a-z]+")


@dataclass(frozen=True)
class Span:
    """A sentence (or the chunk's header context) prepared for matching."""

    terms: frozenset[str]
    text: str  # NFKC, lowercased
    words: frozenset[str]  # Latin words of the text, for prefix matching
    has_number: bool
    pairs: frozenset[tuple[str, str]]  # terms at most two apart, in either order: phrase evidence

    @classmethod
    def of(cls, terms: list[str], raw: str) -> Span:
        text = nfkc(raw).lower()
        words = frozenset(_WORDS.findall(text))
        return cls(frozenset(terms), text, words, has_number(text), term_pairs(terms))


@dataclass(frozen=True)
class ChunkSpans:
    context: Span  # title and headers
    sentences: tuple[Span, ...]


@dataclass(frozen=True)
class Features:
    coverage: float  # share of the question's weight found anywhere in the chunk
    window: float  # the same within the best two consecutive sentences (+ headers)
    window_mass: float  # weight found in that window (idf units): how much evidence in absolute terms
    window_missing: float  # weight of the question not found in that window
    number_wanted: bool  # the question asks when / how many / how much
    number_found: bool  # ... and the window holds a number
    phrases: float  # share of the question's adjacent term pairs found side by side in the window
    framing: float  # share of the question's weight found in the title and headers alone
    window_text: str = ""  # the best window's sentences, for the answer-kind check (fact_kind.py)

    # The names of vector()'s entries, in order: the weights files name their weights so.
    NAMES = (
        "coverage",
        "window",
        "log1p_window_mass",
        "log1p_window_missing",
        "number_signal",
        "phrases",
        "framing",
    )

    def vector(self) -> list[float]:
        type_signal = 0.0 if not self.number_wanted else (1.0 if self.number_found else -1.0)
        return [
            self.coverage,
            self.window,
            math.log1p(self.window_mass),
            math.log1p(self.window_missing),
            type_signal,
            self.phrases,
            self.framing,
        ]


def match(term: str, span: Span, alternatives: tuple[tuple[str, ...], ...] = ()) -> float:
    """1.0 when the span has the term or one of its translations (all its terms), NEAR_MATCH for a
    near form of the term, else 0.0."""
    if term in span.terms or any(all(x in span.terms for x in alt) for alt in alternatives):
        return 1.0
    if _LATIN.match(term):
        if len(term) >= 5:
            prefix = term[: max(5, len(term) - 2)]
            if any(w.startswith(prefix) for w in span.words):
                return NEAR_MATCH
        return 0.0
    return NEAR_MATCH if len(term) >= 2 and term in span.text else 0.0


def features(query: WeightedQuery, chunk: ChunkSpans, number_wanted: bool) -> Features:
    if not query or query.total <= 0:
        return Features(0.0, 0.0, 0.0, 0.0, number_wanted, False, 0.0, 0.0, "")
    sentences = list(chunk.sentences) or [Span.of([], "")]
    # Each term is matched against each span once; the windows below take maxima of these. (Matching
    # per window instead matched every sentence three times and the headers once per window: the
    # grader's hottest loop.)
    terms = list(query.weights.items())
    alts = query.alternatives
    in_context = [match(term, chunk.context, alts.get(term, ())) for term, _ in terms]
    in_sentence = [[match(term, span, alts.get(term, ())) for span in sentences] for term, _ in terms]
    overall = sum(w * max(c, *row) for (_, w), c, row in zip(terms, in_context, in_sentence, strict=True))
    best_mass, best_number, best_phrases, best_text = -1.0, False, 0.0, ""
    for i in range(len(sentences)):
        window = sentences[i : i + 2]
        mass = sum(
            w * max(c, *row[i : i + 2]) for (_, w), c, row in zip(terms, in_context, in_sentence, strict=True)
        )
        if mass > best_mass:
            best_mass, best_number = mass, any(s.has_number for s in window)
            best_phrases = phrase_share(query, window)
            best_text = " ".join(s.text for s in window)
    framing = sum(w * c for (_, w), c in zip(terms, in_context, strict=True))
    return Features(
        coverage=overall / query.total,
        window=best_mass / query.total,
        window_mass=best_mass,
        window_missing=query.total - best_mass,
        number_wanted=number_wanted,
        number_found=best_number,
        phrases=best_phrases,
        framing=framing / query.total,
        window_text=best_text,
    )


def phrase_share(query: WeightedQuery, window: list[Span]) -> float:
    """Weighted share of the question's consecutive term pairs that stand together in the window."""
    return query.phrase_coverage(*(span.pairs for span in window))
