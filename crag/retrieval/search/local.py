"""Retriever over the local index: BM25, fused with dense cosine once the index's vectors are ready."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from crag.config.engine_settings import CragSettings
from crag.core.access import Reader
from crag.core.models import Chunk, GradedChunk
from crag.core.protocols import SearchBuild
from crag.providers.llm.client import LlmClient
from crag.retrieval.search.embedder_choice import attach_embeddings
from crag.retrieval.search.hybrid import DEFAULT_WEIGHTS, FusionWeights, dense_weight, fuse
from crag.retrieval.search.local_index import LocalIndex, SearchHit
from crag.text.bilingual import Translator, translator_for
from crag.text.lang import detect_language
from crag.text.overlap import KIND_WEIGHT, general_weight
from crag.text.tokenize import Word

log = logging.getLogger(__name__)


class LocalRetriever:
    def __init__(
        self,
        index: LocalIndex,
        weights: FusionWeights = DEFAULT_WEIGHTS,
        unknown_allowed: bool = False,
        translator: Translator | None = None,
    ) -> None:
        self._index = index
        self._translator = translator
        self._weights = weights
        self._unknown_allowed = unknown_allowed  # trimming: chunks of unknown permissions readable
        self._languages: dict[str, str] = {}
        self._name = ""  # a fixed name, when someone sets one

    @property
    def name(self) -> str:
        """What /api/health and the eval show: lexical, building vectors, or hybrid with which model."""
        if self._name:
            return self._name
        vectors = self._index.vectors
        if vectors is None:
            notice = self._index.vectors_notice
            return f"local-bm25 (lexical only: {notice})" if notice else "local-bm25"
        if vectors.chunks_ready:
            return f"local-hybrid (bm25 + {vectors.model})"
        if vectors.error:
            return f"local-bm25 (lexical only: embedding failed, {vectors.error})"
        return f"local-bm25 (vectors {vectors.done}/{vectors.total}; hybrid when ready)"

    @name.setter
    def name(self, value: str) -> None:
        self._name = value

    async def search(
        self, query: str, top_k: int, question: str | None = None, reader: Reader | None = None
    ) -> list[GradedChunk]:
        """BM25 over the rewritten query; the dense side embeds `question` when given (the text the
        grader and composer embed too: one embedding per turn, and slightly better recall in
        tools/fit/fit_fusion.py), else the query. With a reader, every ranking holds only the chunks
        the reader may read, filtered before its top k."""
        allowed = None if reader is None else self._index.readable(reader, self._unknown_allowed)
        if allowed is not None and not allowed.any():
            return []
        depth = max(top_k, self._weights.depth)
        lexical = self._lexical(query, depth, allowed)
        translated = self._translated(query, question or query, depth, allowed)
        vectors = self._index.vectors
        if vectors is None or not vectors.chunks_ready:
            return self._without_vectors(lexical, translated, top_k)
        try:
            vector = await vectors.query_vector(question or query)
        except Exception as exc:  # the embedder failed: this turn stays lexical
            log.warning("query embedding failed (%s); lexical search only", exc.__class__.__name__)
            return self._without_vectors(lexical, translated, top_k)
        w = self._weights
        language = detect_language(question or query)
        dense = [h.chunk for h in self._index.search_vector(vector, w.depth, w.signal, None, allowed)]
        w_dense = dense_weight(language, dense, self._languages, w)
        other: list[Chunk] = []
        if w.w_other > 0:
            # e5 ranks passages in the question's language first: a list of the other language's
            # chunks alone gives a Japanese question its English answer (and the reverse) a chance.
            flip = "en" if language == "ja" else "ja"
            other = [h.chunk for h in self._index.search_vector(vector, w.depth, w.signal, flip, allowed)]
        fused = fuse([h.chunk for h in lexical], dense, w_dense, w, other, translated)
        return [GradedChunk(chunk=c, retrieval_score=score) for c, score in fused[:top_k]]

    def _without_vectors(
        self, lexical: list[SearchHit], translated: list[Chunk], top_k: int
    ) -> list[GradedChunk]:
        """BM25 alone (its own scores), or fused with the translated BM25 when there is one."""
        if not translated:
            return [GradedChunk(chunk=h.chunk, retrieval_score=h.score) for h in lexical[:top_k]]
        fused = fuse([h.chunk for h in lexical], [], 0.0, self._weights, translated=translated)
        return [GradedChunk(chunk=c, retrieval_score=score) for c, score in fused[:top_k]]

    def _lexical(self, query: str, k: int, allowed: np.ndarray | None) -> list[SearchHit]:
        # In-memory BM25 over mmap'd arrays takes well under a millisecond per query: no thread hop.
        words = self._index.words(query)
        weights = _term_weights(words)
        return self._index.search_terms([w.term for w in words], k, weights, allowed)

    def _translated(self, query: str, question: str, k: int, allowed: np.ndarray | None) -> list[Chunk]:
        """BM25 over the query's terms in the other language (crag/text/bilingual.py): the lexical
        side of a cross-language question, which plain BM25 cannot reach. Each term's translations
        share its weight."""
        if self._translator is None or self._weights.w_translated <= 0:
            return []
        words = self._index.words(query)
        alternatives = self._translator.alternatives(words, question)
        weights: dict[str, float] = {}
        for term, weight in _term_weights(words).items():
            options = alternatives.get(term, ())
            for option in options:
                for t in option:
                    weights[t] = max(weights.get(t, 0.0), weight / len(options))
        if not weights:
            return []
        return [h.chunk for h in self._index.search_terms(list(weights), k, weights, allowed)]


def _term_weights(words: Sequence[Word]) -> dict[str, float]:
    """Everyday words and verbs weigh less than names and rare terms, as in grading: a short passage
    full of common words must not outrank the one holding the question's rare term."""
    weights: dict[str, float] = {}
    for w in words:
        weights[w.term] = max(weights.get(w.term, 0.0), KIND_WEIGHT.get(w.kind, 1.0) * general_weight(w.zipf))
    return weights


# -- as a search provider (registered in crag/retrieval/search/__init__.py) ---------------------------------
USES_LOCAL_INDEX = True  # the app opens (or builds) it from CRAG_DOCS_DIR before building the engine


def configured(settings: CragSettings) -> bool:
    return True  # the embedded default: a folder of documents needs no settings


def build(settings: CragSettings, index: LocalIndex | None, llm: LlmClient | None) -> SearchBuild:
    if index is None:
        raise ValueError("no document index: configure Azure AI Search or a local documents folder")
    attach_embeddings(settings, index, llm)
    translator = translator_for(settings.lexicon_path, index)
    return SearchBuild(
        LocalRetriever(index, unknown_allowed=settings.access_unknown == "allow", translator=translator)
    )
