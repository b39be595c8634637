"""The local index as retrieval reads it: chunks, a BM25 index (bm25s) over Sudachi terms, term
statistics and (once built) the chunks' vectors.

crag.ingest.local_target builds it from a folder and writes it; this module only loads and searches.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bm25s
import numpy as np

from crag.core.access import Reader, may_read
from crag.core.models import Chunk
from crag.retrieval.embed import ArrayEmbedder
from crag.retrieval.embed.index_vectors import IndexVectors
from crag.retrieval.embed.store import ShardMirror
from crag.text.tokenize import TermExtractor, term_extractor

log = logging.getLogger(__name__)
# bm25s logs every build at DEBUG through its own handler; keep the bot's log readable.
logging.getLogger("bm25s").setLevel(logging.WARNING)

# The files of an index folder (the writer adds its terms file, the vectors add theirs).
MANIFEST_FILE = "manifest.json"
CHUNKS_FILE = "chunks.jsonl"
DOC_FREQ_FILE = "doc_freq.json"
BM25_DIR = "bm25"
MASKS_KEPT = 256  # readers whose chunk masks are kept (a few KB each per 10,000 chunks)


@dataclass(frozen=True)
class SearchHit:
    chunk: Chunk
    score: float


class LocalIndex:
    def __init__(
        self,
        chunks: list[Chunk],
        bm25: bm25s.BM25,
        doc_freq: dict[str, int],
        documents: int,
        extractor: TermExtractor,
    ) -> None:
        self.chunks = chunks
        self.documents = documents
        self.skipped: list[str] = []  # why files were left out, for health and logs
        # file -> what OCR did for its scanned pages (engine, scanned, read, reason, retry), for health
        self.scans: dict[str, dict[str, Any]] = {}
        self.ocr_engine = "none"  # the OCR engine the index was built with
        self.version = ""  # changes whenever the indexed content does (answer cache keys)
        self.hashes: dict[str, str] = {}  # file -> content hash it was built from (what changed since)
        self._bm25 = bm25
        self._df = doc_freq
        self._n = max(1, len(chunks))
        self._max_idf = math.log(1.0 + (self._n + 0.5) / 0.5)
        self.terms = extractor.terms
        self.words = extractor.analyze
        self.dir: Path | None = None  # where the index is stored (its vectors go there too)
        self.vectors: IndexVectors | None = None  # set by attach_vectors; None: lexical only
        self.vectors_notice = ""  # why there are no vectors, when embeddings are unavailable
        # Access trimming: chunk positions per distinct set of readers, and recent readers' masks.
        self._acl_rows: dict[tuple[str, ...] | None, np.ndarray] | None = None
        self._masks: OrderedDict[tuple[Reader, bool], np.ndarray] = OrderedDict()

    # -- vectors (hybrid retrieval, semantic grading) --------------------------------------------
    def attach_vectors(
        self, embedder: ArrayEmbedder, cache_dir: Path | None = None, mirror: ShardMirror | None = None
    ) -> IndexVectors:
        """Give the index an embedder; `await index.vectors.build()` then computes what is missing
        (the bot does it in the background; until it is done, search stays lexical). The shared
        cache (cache_dir) is mirrored to `mirror` when given (a Blob container)."""
        if self.vectors is None or self.vectors.model != embedder.name:
            self.vectors = IndexVectors(self.chunks, embedder, self.dir, cache_dir, mirror)
        return self.vectors

    @property
    def vectors_ready(self) -> bool:
        """Chunk and sentence vectors are all there."""
        return self.vectors is not None and self.vectors.ready

    def chunk_vector(self, chunk_id: str) -> np.ndarray | None:
        """The L2-normalized vector of the chunk's framed text (float32), or None before vectors are ready."""
        return self.vectors.chunk_vector(chunk_id) if self.vectors is not None else None

    def sentence_vectors(self, chunk_id: str) -> tuple[list[str], np.ndarray] | None:
        """(sentences of the chunk body as split_sentences gives them, (n, dim) float32 vectors),
        or None before vectors are ready."""
        return self.vectors.sentence_vectors(chunk_id) if self.vectors is not None else None

    def standing(self, vector: np.ndarray, chunk_id: str) -> tuple[float, float] | None:
        """The chunk's cosine and best-sentence cosine as z-scores among the chunks of its language
        (IndexVectors.standing), or None before vectors are ready."""
        return self.vectors.standing(vector, chunk_id) if self.vectors is not None else None

    async def query_vector(self, text: str) -> np.ndarray | None:
        """The question's vector (embedded once per text while cached: retriever and grader share it),
        or None when the index has no embedder. Runs on the embedder's worker, never the event loop."""
        if self.vectors is None:
            return None
        return await self.vectors.query_vector(text)

    # -- statistics used by the grader ---------------------------------------------------------
    def idf(self, term: str) -> float:
        """BM25 idf relative to that of a term the corpus has never seen (1.0), so that weights
        mean the same in a folder of ten files and in an index of ten thousand."""
        df = self._df.get(term, 0)
        return math.log(1.0 + (self._n - df + 0.5) / (df + 0.5)) / self._max_idf

    def doc_freq(self, term: str) -> int:
        return self._df.get(term, 0)

    @property
    def size(self) -> int:
        return len(self.chunks)

    # -- search ---------------------------------------------------------------------------------
    def search_terms(
        self,
        terms: Sequence[str],
        k: int,
        weights: Mapping[str, float] | None = None,
        allowed: np.ndarray | None = None,
    ) -> list[SearchHit]:
        """Top-k chunks by BM25; with weights, each term's BM25 contribution is scaled by its weight.
        With `allowed` (see `readable`), only those chunks, before the top k is taken."""
        known = [t for t in dict.fromkeys(terms) if t in self._df]
        if not known or not self.chunks:
            return []
        if weights is None:
            scores = self._bm25.get_scores(known)
        else:
            scores = sum(weights.get(t, 1.0) * self._bm25.get_scores([t]) for t in known)
        if allowed is not None:
            scores = np.where(allowed, scores, 0.0)  # a score of 0 is no hit
        k = min(k, len(self.chunks))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        # bm25s scores documents containing none of the terms 0: they are not hits.
        return [SearchHit(self.chunks[i], float(scores[i])) for i in top if scores[i] > 0]

    def search_vector(
        self,
        vector: np.ndarray,
        k: int,
        signal: str = "chunk",
        language: str | None = None,
        allowed: np.ndarray | None = None,
    ) -> list[SearchHit]:
        """Top-k chunks by cosine with the vector (empty until chunk vectors are ready); signal as in
        IndexVectors.dense_scores: the chunk's vector, its best sentence's, or both. With a language
        ("ja" / "en"), only chunks mainly in that language; with `allowed` (see `readable`), only
        those chunks, before the top k is taken."""
        vectors = self.vectors
        scores = vectors.dense_scores(vector, signal) if vectors is not None else None
        if scores is None or not len(scores):
            return []
        candidates = np.arange(len(scores))
        if language is not None and vectors is not None and vectors.languages is not None:
            candidates = np.flatnonzero(vectors.languages == (language == "ja"))
            if not len(candidates):
                return []
        if allowed is not None:
            candidates = candidates[allowed[candidates]]
            if not len(candidates):
                return []
        sub = scores[candidates]
        k = min(k, len(sub))
        top = np.argpartition(-sub, k - 1)[:k]
        top = candidates[top[np.argsort(-sub[top], kind="stable")]]
        return [SearchHit(self.chunks[i], float(scores[i])) for i in top]

    # -- access trimming -----------------------------------------------------------------------
    def readable(self, reader: Reader, unknown_allowed: bool = False) -> np.ndarray:
        """Which chunks the reader may read, one boolean per chunk: the filter each search applies
        before it takes its top k (never after, which would leave a reader with fewer results).
        The chunks of a file share one set of readers, so each distinct set is checked once; the
        masks of the last readers seen are kept (a user's next question reuses theirs)."""
        key = (reader, unknown_allowed)
        mask = self._masks.get(key)
        if mask is not None:
            self._masks.move_to_end(key)
            return mask
        if self._acl_rows is None:
            rows: dict[tuple[str, ...] | None, list[int]] = {}
            for i, chunk in enumerate(self.chunks):
                rows.setdefault(chunk.allowed, []).append(i)
            self._acl_rows = {allowed: np.asarray(r, dtype=np.int64) for allowed, r in rows.items()}
        mask = np.zeros(len(self.chunks), dtype=bool)
        for allowed, where in self._acl_rows.items():
            if may_read(allowed, reader, unknown_allowed):
                mask[where] = True
        self._masks[key] = mask
        while len(self._masks) > MASKS_KEPT:
            self._masks.popitem(last=False)
        return mask

    # -- reading -------------------------------------------------------------------------------
    @classmethod
    def load(cls, index_dir: Path) -> LocalIndex:
        """The index crag.ingest.local_target wrote to index_dir (BM25 memory-mapped)."""
        meta = read_manifest(index_dir)
        with (index_dir / CHUNKS_FILE).open(encoding="utf-8") as f:
            chunks = _compact([Chunk.model_validate_json(line) for line in f if line.strip()])
        df = json.loads((index_dir / DOC_FREQ_FILE).read_text("utf-8"))
        bm25 = (
            bm25s.BM25.load(str(index_dir / BM25_DIR), mmap=True, show_progress=False)
            if chunks
            else bm25s.BM25()
        )
        index = cls(chunks, bm25, df, int(meta["documents"]), term_extractor())
        index.skipped = list(meta.get("skipped", []))
        index.scans = {k: v for k, v in dict(meta.get("scans") or {}).items() if isinstance(v, dict)}
        index.ocr_engine = str(meta["fingerprint"].get("ocr", "none"))
        index.version = index_version(meta["fingerprint"])
        index.hashes = dict(meta["fingerprint"].get("files", {}))
        index.dir = index_dir
        return index


def _compact(chunks: list[Chunk]) -> list[Chunk]:
    """The loaded chunks, sharing what they repeat: the index holds every chunk for as long as it
    serves. A file's chunks name the same file, title, url and headers (one copy each, not one per
    chunk), and each pydantic model carries a set of the fields it was given, always all of them
    here: one set for all (about 0.7 MB per 1,000 chunks). Pydantic copies that set before changing
    it (model_copy), and adding a field it already holds changes nothing."""
    strings: dict[str, str] = {}
    fields: set[str] | None = None
    for c in chunks:
        for name in ("file", "title", "url"):
            value = getattr(c, name)
            object.__setattr__(c, name, strings.setdefault(value, value))
        object.__setattr__(c, "headers", [strings.setdefault(h, h) for h in c.headers])
        fields = fields if fields is not None else c.__pydantic_fields_set__
        if c.__pydantic_fields_set__ == fields:
            object.__setattr__(c, "__pydantic_fields_set__", fields)
    return chunks


def read_manifest(index_dir: Path) -> dict[str, Any]:
    """What the index was built from (its fingerprint) and what it holds. Raises OSError / ValueError."""
    meta = json.loads((index_dir / MANIFEST_FILE).read_text("utf-8"))
    if not isinstance(meta, dict):
        raise ValueError("index manifest is not an object")
    return meta


def index_version(fingerprint: object) -> str:
    return hashlib.sha1(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()[:12]
