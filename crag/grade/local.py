"""A relevance grader without a language model, calibrated to the rubric's meaning.

Evidence is lexical (see evidence.py): how much of the question's information the chunk holds,
overall and within its best two-sentence window, in relative and absolute terms, and whether that
window holds a number when the question asks for one. Question terms are weighted by corpus idf,
word kind and general-language rarity, so a question about a subject the documents never mention
scores low even when its everyday words match.

A logistic model turns the features into the odds that the chunk answers the question; its weights
were fitted on the JSQuAD and SQuAD development sets (bench/fit_grader.py) and are general lexical
weights, not tied to those documents. The logit is then mapped onto the rubric so that scores
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
# log1p(window_missing), number_signal, phrases], then the bias.
WEIGHTS: tuple[float, ...] = (2.167, 1.188, 2.638, -0.159, -0.226, 1.290)
BIAS: float = -5.196
# Logits at which the score reaches the upper (0.8) and lower (0.4) thresholds of the rubric.
LOGIT_UPPER: float = -1.40
LOGIT_LOWER: float = -1.90


def logit(f: Features) -> float:
    return BIAS + sum(w * x for w, x in zip(WEIGHTS, f.vector(), strict=True))


def calibrate(z: float) -> float:
    """Monotone map of the logit onto 0..1 with LOGIT_LOWER -> 0.4 and LOGIT_UPPER -> 0.8."""
    # score = sigmoid(a * (z - c)); solve a, c from the two anchor points.
    lo, hi = math.log(0.4 / 0.6), math.log(0.8 / 0.2)
    a = (hi - lo) / (LOGIT_UPPER - LOGIT_LOWER)
    c = LOGIT_LOWER - lo / a
    return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, a * (z - c)))))


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
