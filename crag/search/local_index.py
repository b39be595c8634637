"""The on-disk local index: chunks + a BM25 index (bm25s) over Sudachi terms + term statistics.

Built from a folder of files; rebuilt when a file's content hash, the file set or an index-shaping
setting changes, loaded (memory-mapped) otherwise.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import bm25s
import numpy as np

from crag.embed import ArrayEmbedder
from crag.embed.index_vectors import IndexVectors
from crag.embed.store import KEYS_FILE, VECTORS_FILE
from crag.ingest.chunker import chunk_document
from crag.ingest.loaders import DocumentError, discover, load
from crag.models import Chunk
from crag.text.tokenize import TermExtractor, term_extractor

log = logging.getLogger(__name__)
# bm25s logs every build at DEBUG through its own handler; keep the bot's log readable.
logging.getLogger("bm25s").setLevel(logging.WARNING)

# Bump when tokenization or chunking changes so that old indexes are rebuilt, not misread.
INDEX_FORMAT = 8


@dataclass(frozen=True)
class BuildReport:
    documents: int
    chunks: int
    skipped: list[str]  # human-readable reasons, one per broken file
    seconds: float
    bytes: int  # text read and indexed in this build (reused files excluded)
    reused: int = 0  # files taken unchanged from the previous build


@dataclass(frozen=True)
class SearchHit:
    chunk: Chunk
    score: float


def _file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _fingerprint(docs_dir: Path, max_chars: int, base_url: str, max_tokens: int) -> dict[str, object]:
    files = discover(docs_dir) if docs_dir.is_dir() else []
    return {
        "format": INDEX_FORMAT,
        "max_chars": max_chars,
        "max_tokens": max_tokens,
        "base_url": base_url,
        "files": {p.relative_to(docs_dir).as_posix(): _file_hash(p) for p in files},
    }


def document_url(base_url: str, rel_file: str) -> str:
    return base_url.rstrip("/") + "/" + quote(rel_file) if base_url else ""


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
        self.version = ""  # changes whenever the indexed content does (answer cache keys)
        self._bm25 = bm25
        self._df = doc_freq
        self._n = max(1, len(chunks))
        self._max_idf = math.log(1.0 + (self._n + 0.5) / 0.5)
        self.terms = extractor.terms
        self.words = extractor.analyze
        self.dir: Path | None = None  # where the index is stored (its vectors go there too)
        self.vectors: IndexVectors | None = None  # set by attach_vectors; None: lexical only
        self.vectors_notice = ""  # why there are no vectors, when embeddings are unavailable

    # -- vectors (hybrid retrieval, semantic grading) --------------------------------------------
    def attach_vectors(self, embedder: ArrayEmbedder, cache_dir: Path | None = None) -> IndexVectors:
        """Give the index an embedder; `await index.vectors.build()` then computes what is missing
        (the bot does it in the background; until it is done, search stays lexical)."""
        if self.vectors is None or self.vectors.model != embedder.name:
            self.vectors = IndexVectors(self.chunks, embedder, self.dir, cache_dir)
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
        self, terms: Sequence[str], k: int, weights: Mapping[str, float] | None = None
    ) -> list[SearchHit]:
        """Top-k chunks by BM25; with weights, each term's BM25 contribution is scaled by its weight."""
        known = [t for t in dict.fromkeys(terms) if t in self._df]
        if not known or not self.chunks:
            return []
        if weights is None:
            scores = self._bm25.get_scores(known)
        else:
            scores = sum(weights.get(t, 1.0) * self._bm25.get_scores([t]) for t in known)
        k = min(k, len(self.chunks))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        # bm25s scores documents containing none of the terms 0: they are not hits.
        return [SearchHit(self.chunks[i], float(scores[i])) for i in top if scores[i] > 0]

    def search_vector(
        self, vector: np.ndarray, k: int, signal: str = "chunk", language: str | None = None
    ) -> list[SearchHit]:
        """Top-k chunks by cosine with the vector (empty until chunk vectors are ready); signal as in
        IndexVectors.dense_scores: the chunk's vector, its best sentence's, or both. With a language
        ("ja" / "en"), only chunks mainly in that language."""
        vectors = self.vectors
        scores = vectors.dense_scores(vector, signal) if vectors is not None else None
        if scores is None or not len(scores):
            return []
        candidates = np.arange(len(scores))
        if language is not None and vectors is not None and vectors.languages is not None:
            candidates = np.flatnonzero(vectors.languages == (language == "ja"))
            if not len(candidates):
                return []
        sub = scores[candidates]
        k = min(k, len(sub))
        top = np.argpartition(-sub, k - 1)[:k]
        top = candidates[top[np.argsort(-sub[top], kind="stable")]]
        return [SearchHit(self.chunks[i], float(scores[i])) for i in top]

    # -- persistence ----------------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        docs_dir: Path,
        index_dir: Path,
        max_chars: int = 1200,
        base_url: str = "",
        progress: Callable[[str, int, int], None] | None = None,
        max_tokens: int = 0,
        fingerprint: dict[str, object] | None = None,
    ) -> tuple[LocalIndex, BuildReport]:
        """Build the index; files whose content hash is unchanged since the last build are reused
        as they were (chunks and terms), so re-ingesting a large folder only reads what changed."""
        started = time.perf_counter()
        if not docs_dir.is_dir():
            raise FileNotFoundError(f"documents folder not found: {docs_dir}")
        extractor = term_extractor()
        fingerprint = fingerprint or _fingerprint(docs_dir, max_chars, base_url, max_tokens)
        hashes: dict[str, str] = fingerprint["files"]  # type: ignore[assignment]
        previous = _previous_build(index_dir, fingerprint)
        chunks: list[Chunk] = []
        tokens: list[list[str]] = []
        skipped: list[str] = []
        total_bytes = reused = 0
        fresh: list[int] = []  # positions of chunks read in this build (their terms still to compute)
        links: list[str] = []  # symbolic links met (never followed): reported, not counted as files
        files = discover(docs_dir, links)
        for i, path in enumerate(files):
            rel = path.relative_to(docs_dir).as_posix()
            if progress:
                progress(path.name, i, len(files))
            old = previous.get(rel)
            if old is not None and old[0] == hashes.get(rel):
                reused += 1
                for chunk, terms in old[1]:
                    chunks.append(chunk)
                    tokens.append(terms)
                continue
            try:
                doc = load(path, docs_dir)
            except DocumentError as exc:
                log.warning("skipping document: %s", exc)
                skipped.append(str(exc))
                continue
            total_bytes += len(doc.text.encode())
            for chunk in chunk_document(doc, max_chars, document_url(base_url, doc.file), max_tokens):
                chunks.append(chunk)
                tokens.append([])
                fresh.append(len(chunks) - 1)
        if progress:
            progress("", len(files), len(files))
        # Sudachi releases the GIL while it tokenizes: threads use every core for the bulk of a build.
        workers = min(4, os.cpu_count() or 1)
        with ThreadPoolExecutor(workers) as pool:
            # Title and section headers are searchable: questions name the subject the body leaves implicit.
            texts = [chunks[i].framed_text for i in fresh]
            for i, terms in zip(fresh, pool.map(extractor.terms, texts, chunksize=64), strict=True):
                tokens[i] = terms
        df: Counter[str] = Counter()
        for toks in tokens:
            df.update(set(toks))
        bm25 = bm25s.BM25()
        if chunks:
            bm25.index(tokens, show_progress=False)
        documents = len(files) - len(skipped)
        skipped = links + skipped
        index = cls(chunks, bm25, dict(df), documents, extractor)
        index.skipped = skipped
        index.version = _version(fingerprint)
        index._save(index_dir, fingerprint, tokens)
        index.dir = index_dir
        report = BuildReport(
            documents=documents,
            chunks=len(chunks),
            skipped=skipped,
            seconds=time.perf_counter() - started,
            bytes=total_bytes,
            reused=reused,
        )
        return index, report

    def _save(self, index_dir: Path, fingerprint: dict[str, object], tokens: list[list[str]]) -> None:
        # Write to a sibling folder, then swap: a crash mid-build never leaves a half index behind.
        tmp = index_dir.with_name(index_dir.name + ".building")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        with (tmp / "chunks.jsonl").open("w", encoding="utf-8") as f:
            for c in self.chunks:
                f.write(c.model_dump_json() + "\n")
        with (tmp / "tokens.jsonl").open("w", encoding="utf-8") as f:
            for terms in tokens:
                f.write(json.dumps(terms, ensure_ascii=False) + "\n")
        (tmp / "doc_freq.json").write_text(json.dumps(self._df, ensure_ascii=False), "utf-8")
        if self.chunks:
            self._bm25.save(str(tmp / "bm25"), show_progress=False)
        meta = {
            "fingerprint": fingerprint,
            "documents": self.documents,
            "chunks": len(self.chunks),
            "skipped": self.skipped,
        }
        (tmp / "manifest.json").write_text(json.dumps(meta, ensure_ascii=False, indent=1), "utf-8")
        # Vectors are keyed by content: the old index's serve the new one for every unchanged chunk.
        for name in (VECTORS_FILE, KEYS_FILE):
            if (index_dir / name).is_file():
                shutil.copyfile(index_dir / name, tmp / name)
        old = index_dir.with_name(index_dir.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if index_dir.exists():
            index_dir.rename(old)
        tmp.rename(index_dir)
        shutil.rmtree(old, ignore_errors=True)

    @classmethod
    def load(cls, index_dir: Path) -> LocalIndex:
        meta = json.loads((index_dir / "manifest.json").read_text("utf-8"))
        with (index_dir / "chunks.jsonl").open(encoding="utf-8") as f:
            chunks = [Chunk.model_validate_json(line) for line in f if line.strip()]
        df = json.loads((index_dir / "doc_freq.json").read_text("utf-8"))
        bm25 = (
            bm25s.BM25.load(str(index_dir / "bm25"), mmap=True, show_progress=False)
            if chunks
            else bm25s.BM25()
        )
        index = cls(chunks, bm25, df, int(meta["documents"]), term_extractor())
        index.skipped = list(meta.get("skipped", []))
        index.version = _version(meta["fingerprint"])
        index.dir = index_dir
        return index

    @staticmethod
    def is_current(index_dir: Path, fingerprint: dict[str, object]) -> bool:
        try:
            meta = json.loads((index_dir / "manifest.json").read_text("utf-8"))
        except (OSError, ValueError):
            return False
        return bool(meta.get("fingerprint") == fingerprint)

    @classmethod
    def open(
        cls,
        docs_dir: Path,
        index_dir: Path,
        max_chars: int = 1200,
        base_url: str = "",
        progress: Callable[[str, int, int], None] | None = None,
        max_tokens: int = 0,
    ) -> tuple[LocalIndex, BuildReport | None]:
        """Load the index if it matches the documents, otherwise (re)build it."""
        # Hashing every file is the costly part of the check: do it once, for the check and the build.
        fingerprint = _fingerprint(docs_dir, max_chars, base_url, max_tokens) if docs_dir.is_dir() else None
        if fingerprint is not None and cls.is_current(index_dir, fingerprint):
            try:
                return cls.load(index_dir), None
            except (OSError, ValueError, KeyError) as exc:
                log.warning("local index unreadable (%s); rebuilding", exc.__class__.__name__)
        return cls.build(docs_dir, index_dir, max_chars, base_url, progress, max_tokens, fingerprint)


def _version(fingerprint: object) -> str:
    return hashlib.sha1(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()[:12]


def _previous_build(
    index_dir: Path, fingerprint: dict[str, object]
) -> dict[str, tuple[str, list[tuple[Chunk, list[str]]]]]:
    """file -> (content hash, [(chunk, terms)]) of the last build, when its settings match."""
    try:
        meta = json.loads((index_dir / "manifest.json").read_text("utf-8"))
        old = meta["fingerprint"]
        if any(old.get(k) != fingerprint[k] for k in ("format", "max_chars", "max_tokens", "base_url")):
            return {}
        with (index_dir / "chunks.jsonl").open(encoding="utf-8") as f:
            chunks = [Chunk.model_validate_json(line) for line in f if line.strip()]
        with (index_dir / "tokens.jsonl").open(encoding="utf-8") as f:
            tokens = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    if len(chunks) != len(tokens):
        return {}
    out: dict[str, tuple[str, list[tuple[Chunk, list[str]]]]] = {}
    for chunk, terms in zip(chunks, tokens, strict=True):
        file_hash = old["files"].get(chunk.file)
        if file_hash is not None:
            out.setdefault(chunk.file, (file_hash, []))[1].append((chunk, terms))
    return out
