"""A relevance grader without a language model, calibrated to the rubric's meaning.

Evidence is lexical: how much of the question's information (idf-weighted terms) the chunk holds,
overall and within the best two-sentence window (an answer sits where the question's terms meet).
Terms the corpus has never seen weigh the most, so a question about a subject the documents do not
cover scores low even when its common words match. The mapping from evidence to score is a
monotone curve fitted so that >= 0.8 means "answers it" and < 0.4 means "does not".
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from crag.models import Chunk
from crag.search.local_index import LocalIndex
from crag.text.overlap import WeightedQuery, weighted_query
from crag.text.sentences import split_sentences

# (evidence, score) anchors of the calibration curve; linear in between.
_CURVE: tuple[tuple[float, float], ...] = (
    (0.0, 0.0),
    (0.2, 0.1),
    (0.32, 0.4),
    (0.45, 0.8),
    (0.7, 0.95),
    (1.0, 1.0),
)


@dataclass(frozen=True)
class ChunkTerms:
    context: frozenset[str]  # title and header terms: they frame every sentence
    sentences: tuple[frozenset[str], ...]
    all: frozenset[str]


@dataclass(frozen=True)
class Evidence:
    coverage: float  # share of question information anywhere in the chunk
    window: float  # share within the best two consecutive sentences (+ headers)

    @property
    def combined(self) -> float:
        return 0.4 * self.coverage + 0.6 * self.window


def calibrate(evidence: float) -> float:
    for (x0, y0), (x1, y1) in pairwise(_CURVE):
        if evidence <= x1:
            return y0 + (y1 - y0) * (evidence - x0) / (x1 - x0)
    return 1.0


class LocalGrader:
    name = "local-lexical"

    def __init__(self, index: LocalIndex, cache_size: int = 4096) -> None:
        self._index = index
        self._cache: OrderedDict[str, ChunkTerms] = OrderedDict()
        self._cache_size = cache_size

    async def grade(self, question: str, chunks: Sequence[Chunk]) -> list[float]:
        query = weighted_query(self._index.words(question), self._index.idf)
        return [round(calibrate(self.evidence(query, c).combined), 3) for c in chunks]

    def evidence(self, query: WeightedQuery, chunk: Chunk) -> Evidence:
        if not query:
            return Evidence(0.0, 0.0)
        terms = self.chunk_terms(chunk)
        window = 0.0
        sentences = terms.sentences or (frozenset(),)
        for i in range(len(sentences)):
            pair = sentences[i] | (sentences[i + 1] if i + 1 < len(sentences) else frozenset())
            window = max(window, query.coverage(pair | terms.context))
        return Evidence(query.coverage(terms.all), window)

    def chunk_terms(self, chunk: Chunk) -> ChunkTerms:
        cached = self._cache.get(chunk.id)
        if cached is not None:
            self._cache.move_to_end(chunk.id)
            return cached
        context = frozenset(self._index.terms(" ".join(dict.fromkeys(chunk.headers))))
        sentences = tuple(frozenset(self._index.terms(s)) for s in split_sentences(chunk.text))
        result = ChunkTerms(context, sentences, context.union(*sentences))
        self._cache[chunk.id] = result
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return result
