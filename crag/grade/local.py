"""A relevance grader without a language model, calibrated to the rubric's meaning.

Evidence is lexical (see evidence.py): how much of the question's information the chunk holds,
overall and within its best two-sentence window, in relative and absolute terms, and whether that
window holds a number when the question asks for one, and how much of the question the chunk's
title and headers name on their own. Question terms are weighted by corpus idf,
word kind and general-language rarity, so a question about a subject the documents never mention
scores low even when its everyday words match.

A logistic model turns the features into the odds that the question can be answered from the
chunk; its weights were fitted on the JSQuAD and SQuAD development sets (bench/fit_grader.py), on
the one chunk per question that routing looks at, and are general lexical weights, not tied to
those documents. The logit is then mapped onto the rubric so that scores
>= 0.8 mean "answers it" and < 0.4 "does not"; the band between is kept narrow because a grader that
hedges sends answerable questions to the web.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence

from crag.grade.evidence import ChunkSpans, Features, Span, features
from crag.models import Chunk
from crag.text.overlap import WeightedQuery, weighted_query
from crag.text.question import asks_for_number
from crag.text.sentences import split_sentences
from crag.text.stats import TermStats

# Logistic weights for Features.vector() = [coverage, window, log1p(window_mass),
# log1p(window_missing), number_signal, phrases, framing], then the bias. The logit is the
# log-odds that the question can be answered from the chunk (bench/fit_grader.py).
WEIGHTS: tuple[float, ...] = (1.683, 1.171, 2.683, -2.376, -0.320, 1.709, 1.813)
BIAS: float = -1.343
# Logits at which the score reaches the upper (0.8) and lower (0.4) thresholds of the rubric.
LOGIT_UPPER: float = 0.10
LOGIT_LOWER: float = -0.10


def logit(f: Features) -> float:
    return BIAS + sum(w * x for w, x in zip(WEIGHTS, f.vector(), strict=True))


def calibrate(z: float) -> float:
    """Monotone map of the logit onto 0..1: LOGIT_LOWER -> 0.4 and LOGIT_UPPER -> 0.8, linear
    between them, and tails that approach 0 and 1 one logit unit at a time, so grades stay spread
    over the rubric rather than piling up at 0 and 1 when the ambiguous band is narrow."""
    if z >= LOGIT_UPPER:
        return 0.8 + 0.2 * (1.0 - math.exp(-min(50.0, z - LOGIT_UPPER)))
    if z <= LOGIT_LOWER:
        return 0.4 * math.exp(max(-50.0, z - LOGIT_LOWER))
    return 0.4 + 0.4 * (z - LOGIT_LOWER) / (LOGIT_UPPER - LOGIT_LOWER)


class LocalGrader:
    name = "local-lexical"

    def __init__(self, index: TermStats, cache_size: int = 4096) -> None:
        self._index = index
        self._cache: OrderedDict[str, ChunkSpans] = OrderedDict()
        self._cache_size = cache_size

    async def grade(self, question: str, chunks: Sequence[Chunk]) -> list[float]:
        query = self.query(question)
        wants_number = asks_for_number(question)
        return [round(calibrate(logit(self.features(query, c, wants_number))), 3) for c in chunks]

    def query(self, question: str) -> WeightedQuery:
        return weighted_query(self._index.words(question), self._index.idf)

    def features(self, query: WeightedQuery, chunk: Chunk, wants_number: bool) -> Features:
        return features(query, self.spans(chunk), wants_number)

    def spans(self, chunk: Chunk) -> ChunkSpans:
        cached = self._cache.get(chunk.id)
        if cached is not None:
            self._cache.move_to_end(chunk.id)
            return cached
        terms = self._index.terms
        header_text = " ".join(dict.fromkeys(chunk.headers))
        result = ChunkSpans(
            context=Span.of(terms(header_text), header_text),
            sentences=tuple(Span.of(terms(s), s) for s in split_sentences(chunk.text)),
        )
        self._cache[chunk.id] = result
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return result
