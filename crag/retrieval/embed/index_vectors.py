"""The local index's vectors: one per chunk (heading path + body, `Chunk.framed_text`) and one per
sentence of each chunk's body (under its section's heading), built after the index (in the
background in the bot), stored with it.

Progress is observable (`status()`); retrieval turns hybrid as soon as every chunk has its vector
(`chunks_ready`), the sentence vectors for the grader follow (`ready`). Vectors already in the index
folder or the shared cache are reused by content hash: only new or changed text is embedded.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from crag.core.models import Chunk
from crag.retrieval.embed import ArrayEmbedder
from crag.retrieval.embed.store import ShardMirror, SharedCache, read_vectors, text_key, write_vectors
from crag.text.lang import text_language
from crag.text.sentences import split_sentences

log = logging.getLogger(__name__)

# Passages per call to the embedder: small, so a turn's question never waits long behind a batch.
BATCH = 8
# Up to this many chunks a turn scores every sentence of the index (exact). Above it, a company-sized
# library: every chunk's own vector is still scored, but the sentences only of the SHORTLIST chunks
# nearest the question, of a fixed sample of SPREAD_SAMPLE chunks (the spread the grader's z-scores
# are measured against) and of any chunk the grader asks about; the rest are estimated from their
# chunk's cosine. Of the ~0.4 GB of float16 sentence vectors of 100,000 chunks a turn then reads a few
# thousand rows, not all, and no float32 copy of them is kept (docs/performance.md: the turn at
# 100,000 chunks).
EXACT_SENTENCES_UP_TO = 20_000
SHORTLIST = 2_000
SPREAD_SAMPLE = 4_000
_FLUSH_SECONDS = 20.0  # partial work is saved this often, so a restart resumes where it stopped

Progress = Callable[[int, int], None]
_Stats = dict[bool, tuple[Any, float]]  # per language group (True: Japanese): mean (float32), spread


def sentence_in_section(chunk: Chunk, sentence: str) -> str:
    """What a sentence's vector is made from: its section's heading, then the sentence. Alone, "The
    review takes about 10 business days." says nothing of software requests; under its heading it
    does. Measured with the grader refitted on these vectors (eval CLI, embedded default): answers
    holding the gold went 0.769 -> 0.791 on data/eval/sample-docs and 0.658 -> 0.675 on business-dev."""
    heading = chunk.headers[-1] if chunk.headers else chunk.title
    return f"{heading}: {sentence}" if heading else sentence


class IndexVectors:
    def __init__(
        self,
        chunks: Sequence[Chunk],
        embedder: ArrayEmbedder,
        index_dir: Path | None,
        cache_dir: Path | None = None,
        mirror: ShardMirror | None = None,
    ) -> None:
        self.embedder = embedder
        self.model = embedder.name
        self._chunks = list(chunks)
        self._index_dir = index_dir
        self._cache = SharedCache(cache_dir, self.model, mirror) if cache_dir is not None else None
        self._row_of: dict[str, int] = {c.id: i for i, c in enumerate(self._chunks)}
        self._sentences: list[list[str]] = []
        self._chunk_keys: list[str] = []
        self._sentence_keys: list[list[str]] = []
        self.chunk_matrix: np.ndarray | None = None  # (chunks, dim) float32, set when chunks_ready
        self._sentence_matrix: np.ndarray | None = None  # (sentences, dim) float16
        self._sentence_offsets: np.ndarray | None = None  # chunk i's rows: offsets[i]:offsets[i+1]
        self._sentences32: np.ndarray | None = None  # the same in float32, for search
        self.languages: np.ndarray | None = None  # per chunk: True where its text is mainly Japanese
        # (question vector, chunk cosines, best sentence cosines, which best ones are exact: None
        # when all are) for the last question; (vector, chunk stats, sentence stats) for standing.
        self._last_cosines: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None] | None = None
        self._last_standing: tuple[np.ndarray, _Stats, _Stats] | None = None
        self._spread_cache: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._stored_keys: set[str] = set()  # the keys the index folder held when _plan read it
        self.done = 0
        self.total = 0
        self.embedded = 0  # texts embedded by this build (not found in the index folder or cache)
        self.seconds = 0.0
        self.error = ""
        self._build_lock = asyncio.Lock()

    # -- state ------------------------------------------------------------------------------------
    @property
    def chunks_ready(self) -> bool:
        return self.chunk_matrix is not None

    @property
    def ready(self) -> bool:
        return self._sentence_matrix is not None

    def status(self) -> dict[str, object]:
        out: dict[str, object] = {
            "model": self.model,
            "ready": self.ready,
            "chunks_ready": self.chunks_ready,
            "done": self.done,
            "total": self.total,
        }
        if self.error:
            out["error"] = self.error
        return out

    # -- what the grader and the retriever read --------------------------------------------------
    def chunk_vector(self, chunk_id: str) -> np.ndarray | None:
        row = self._row_of.get(chunk_id)
        if row is None or self.chunk_matrix is None:
            return None
        vector: np.ndarray = self.chunk_matrix[row]
        return vector

    def sentence_vectors(self, chunk_id: str) -> tuple[list[str], np.ndarray] | None:
        row = self._row_of.get(chunk_id)
        if row is None or self._sentence_matrix is None or self._sentence_offsets is None:
            return None
        start, end = int(self._sentence_offsets[row]), int(self._sentence_offsets[row + 1])
        matrix = self._sentences32 if self._sentences32 is not None else self._sentence_matrix
        return self._sentences[row], np.asarray(matrix[start:end], np.float32)

    def dense_scores(self, vector: np.ndarray, signal: str = "chunk") -> np.ndarray | None:
        """Cosine of every chunk with the vector: of its framed text (`chunk`), of its best sentence
        (`sentence`, the chunk's own where it has none), or their sum (`sum`)."""
        if self.chunk_matrix is None or self.chunk_matrix.shape[1:] != vector.shape:
            return None
        chunk, best = self._cosines(vector)
        if signal == "chunk":
            return chunk
        out: np.ndarray = best if signal == "sentence" else chunk + best
        return out

    def _cosines(self, vector: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(every chunk's cosine, its best sentence's cosine: the chunk's own where it has no
        sentence vectors), computed once per question vector: retrieval's lists and the grader's
        standing all read them, so each matrix is multiplied once per turn."""
        last = self._last_cosines
        if last is not None and _same(last[0], vector):
            return last[1], last[2]
        assert self.chunk_matrix is not None
        chunk: np.ndarray = self.chunk_matrix @ vector
        best = chunk.copy()
        exact: np.ndarray | None = None
        offsets = self._sentence_offsets
        if self._sentence_matrix is not None and offsets is not None and len(self._sentence_matrix):
            if len(chunk) <= EXACT_SENTENCES_UP_TO:
                nonempty = offsets[1:] > offsets[:-1]
                per_sentence = self._sentence_rows32() @ vector
                best[nonempty] = np.maximum.reduceat(per_sentence, offsets[:-1][nonempty])
            else:
                exact = np.zeros(len(chunk), bool)
                sample, sample_sentences, sample_starts = self._spread()
                best[sample] = chunk[sample]
                has = sample_starts[1:] > sample_starts[:-1]
                if len(sample_sentences):
                    per_sentence = sample_sentences @ vector
                    best[sample[has]] = np.maximum.reduceat(per_sentence, sample_starts[:-1][has])
                exact[sample] = True
                near = np.argpartition(-chunk, SHORTLIST - 1)[:SHORTLIST]
                near = near[~exact[near]]
                best[near] = self._best_sentences(vector, near)
                exact[near] = True
                # The others: their chunk's cosine plus the typical gap, measured on the sample.
                best[~exact] += float(np.median(best[sample] - chunk[sample]))
        self._last_cosines = (vector, chunk, best, exact)
        return chunk, best

    def _sentence_rows32(self) -> np.ndarray:
        matrix = self._sentences32 if self._sentences32 is not None else self._sentence_matrix
        assert matrix is not None
        return matrix

    def _best_sentences(self, vector: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The best sentence cosine of each chunk row (the chunk's own where it has no sentences)."""
        assert self._sentence_offsets is not None and self.chunk_matrix is not None
        starts, ends = self._sentence_offsets[rows], self._sentence_offsets[rows + 1]
        counts = ends - starts
        out: np.ndarray = self.chunk_matrix[rows] @ vector
        has = counts > 0
        if has.any():
            # every sentence row of the chunks that have some, in order
            first = np.repeat(starts[has] - np.cumsum(counts[has]) + counts[has], counts[has])
            picked = first + np.arange(int(counts[has].sum()))
            cosines = np.asarray(self._sentence_rows32()[picked], np.float32) @ vector
            group_starts = np.concatenate(([0], np.cumsum(counts[has])[:-1]))
            out[has] = np.maximum.reduceat(cosines, group_starts)
        return out

    def _spread(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A fixed sample of chunk rows (the same every turn, sorted), their sentence vectors in
        float32 and where each row's sentences start in them: made once, read every turn."""
        if self._spread_cache is None:
            assert self._sentence_offsets is not None
            rng = np.random.default_rng(0)
            size = min(SPREAD_SAMPLE, len(self._chunks))
            rows = np.sort(rng.choice(len(self._chunks), size=size, replace=False))
            starts, ends = self._sentence_offsets[rows], self._sentence_offsets[rows + 1]
            ranges = [np.arange(a, b, dtype=np.int64) for a, b in zip(starts, ends, strict=True)]
            picked = np.concatenate(ranges) if ranges else np.zeros(0, np.int64)
            matrix = np.asarray(self._sentence_rows32()[picked], np.float32)
            offsets = np.concatenate(([0], np.cumsum(ends - starts))).astype(np.int64)
            self._spread_cache = (rows, matrix, offsets)
        return self._spread_cache

    def standing(self, vector: np.ndarray, chunk_id: str) -> tuple[float, float] | None:
        """How far the chunk stands out for this question among the index's chunks in its own
        language: the z-scores of its cosine and of its best sentence's cosine against those of every
        chunk mainly in the same language. A multilingual model scores a question lower against every
        passage in the other language, the answering one included; against its own language's
        passages, the answering one still stands out. In a company-sized library the best sentences'
        spread is measured on the fixed sample, and the chunk's own best sentence exactly. None before
        vectors are ready."""
        row = self._row_of.get(chunk_id)
        if row is None or self.chunk_matrix is None or self.languages is None:
            return None
        chunk, best = self._cosines(vector)
        exact = self._last_cosines[3] if self._last_cosines is not None else None
        if exact is not None and not exact[row]:
            best[row] = self._best_sentences(vector, np.array([row]))[0]
            exact[row] = True
        last = self._last_standing
        if last is None or not _same(last[0], vector):
            pool = None if exact is None else self._spread()[0]
            chunk_stats, best_stats = _group_stats(self.languages, chunk, best, pool_rows=pool)
            last = (vector, chunk_stats, best_stats)
            self._last_standing = last
        _, chunk_stats, best_stats = last
        group = bool(self.languages[row])
        (c_mean, c_sd), (b_mean, b_sd) = chunk_stats[group], best_stats[group]
        # One-row arrays: float32 arithmetic, as when every row's z-score was computed at once.
        here = slice(row, row + 1)
        return float(((chunk[here] - c_mean) / c_sd)[0]), float(((best[here] - b_mean) / b_sd)[0])

    async def query_vector(self, text: str) -> np.ndarray:
        return await self.embedder.query_array(text)

    # -- build ------------------------------------------------------------------------------------
    async def build(self, progress: Progress | None = None) -> None:
        """Compute what is missing, then publish the matrices. Safe to await from several callers:
        the second waits for the first. Raises what the embedder raises (the caller logs it)."""
        async with self._build_lock:
            if self.ready:
                return
            started = time.perf_counter()
            try:
                await self._build(progress)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.error = exc.__class__.__name__
                raise
            finally:
                self.seconds = time.perf_counter() - started

    async def _build(self, progress: Progress | None) -> None:
        known, chunk_todo, sentence_todo = await asyncio.to_thread(self._plan)
        self.total = len(set(self._chunk_keys) | {k for keys in self._sentence_keys for k in keys})
        self.done = self.total - len(chunk_todo) - len(sentence_todo)
        if progress:
            progress(self.done, self.total)
        fresh: dict[str, np.ndarray] = {}
        last_flush = time.monotonic()
        try:
            for phase, todo in enumerate((chunk_todo, sentence_todo)):
                for start in range(0, len(todo), BATCH):
                    batch = todo[start : start + BATCH]
                    vectors = await self.embedder.passages_array([text for _, text in batch])
                    for (key, _), vector in zip(batch, vectors, strict=True):
                        fresh[key] = known[key] = vector.astype(np.float16)
                    self.done += len(batch)
                    self.embedded += len(batch)
                    if progress:
                        progress(self.done, self.total)
                    if time.monotonic() - last_flush > _FLUSH_SECONDS:
                        await asyncio.to_thread(self._save, known, dict(fresh))
                        fresh.clear()
                        last_flush = time.monotonic()
                if phase == 0:
                    self.chunk_matrix = self._assemble_chunks(known)
        finally:
            if fresh:
                # Also on cancellation: what was computed is kept for the next start.
                await asyncio.shield(asyncio.to_thread(self._save, known, dict(fresh)))
        self.publish_sentences(*self._assemble_sentences(known))
        # Cosines cached while only the chunk vectors were there lack the best sentences: drop them.
        self._last_cosines = None
        if self.embedded == 0 and self._index_dir is not None:
            await asyncio.to_thread(self._save_index_if_stale, known)

    def _plan(self) -> tuple[dict[str, np.ndarray], list[tuple[str, str]], list[tuple[str, str]]]:
        """(vectors already known, chunk texts to embed, sentence texts to embed), deduplicated."""
        model = self.model
        self._sentences = [split_sentences(c.text) for c in self._chunks]
        self.languages = np.array([text_language(c.framed_text) == "ja" for c in self._chunks], bool)
        self._chunk_keys = [text_key(model, c.framed_text) for c in self._chunks]
        pairs = zip(self._chunks, self._sentences, strict=True)
        framed = [[sentence_in_section(c, s) for s in sents] for c, sents in pairs]
        self._sentence_keys = [[text_key(model, s) for s in sents] for sents in framed]
        wanted: dict[str, str] = {}
        for chunk, key in zip(self._chunks, self._chunk_keys, strict=True):
            wanted.setdefault(key, chunk.framed_text)
        chunk_keys = set(wanted)
        for sents, keys in zip(framed, self._sentence_keys, strict=True):
            for s, key in zip(sents, keys, strict=True):
                wanted.setdefault(key, s)
        known: dict[str, np.ndarray] = {}
        self._stored_keys = set()
        if self._index_dir is not None:
            stored = read_vectors(self._index_dir, model)
            self._stored_keys = set(stored)
            known = {k: np.array(stored[k]) for k in wanted.keys() & self._stored_keys}
        missing = [k for k in wanted if k not in known]
        if self._cache is not None and missing:
            known.update(self._cache.load(missing))
        chunk_todo = [(k, wanted[k]) for k in wanted if k in chunk_keys and k not in known]
        sentence_todo = [(k, wanted[k]) for k in wanted if k not in chunk_keys and k not in known]
        return known, chunk_todo, sentence_todo

    def _save(self, known: dict[str, np.ndarray], fresh: dict[str, np.ndarray]) -> None:
        if self._cache is not None:
            self._cache.add(fresh)
        if self._index_dir is not None and self._index_dir.is_dir():
            try:
                write_vectors(self._index_dir, self.model, known)
            except OSError as exc:
                log.warning("index vectors not saved (%s)", exc.__class__.__name__)

    def _save_index_if_stale(self, known: dict[str, np.ndarray]) -> None:
        """All vectors came from the cache or an older index: store them with this index too (the
        index folder's keys as _plan read them: reading them again took 0.5 s at 100,000 chunks)."""
        assert self._index_dir is not None
        if self._stored_keys != known.keys():
            self._save(known, {})

    def publish_sentences(self, matrix: np.ndarray, offsets: np.ndarray) -> None:
        """Make the sentence vectors (float16, chunk i's rows offsets[i]:offsets[i+1]) the ones read."""
        self._sentence_offsets = offsets
        # A float32 copy for the exact per-turn product; a company-sized library reads a few thousand
        # rows per turn and converts those (a float32 copy of 100,000 chunks' sentences is ~0.8 GB).
        self._sentences32 = matrix.astype(np.float32) if len(self._chunks) <= EXACT_SENTENCES_UP_TO else None
        self._sentence_matrix = matrix

    def _assemble_chunks(self, known: dict[str, np.ndarray]) -> np.ndarray:
        if not self._chunk_keys:
            return np.zeros((0, 0), np.float32)
        return np.stack([known[k] for k in self._chunk_keys]).astype(np.float32)

    def _assemble_sentences(self, known: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        counts = [len(keys) for keys in self._sentence_keys]
        offsets = np.zeros(len(counts) + 1, np.int64)
        offsets[1:] = np.cumsum(counts)
        flat = [known[k] for keys in self._sentence_keys for k in keys]
        dim = self.chunk_matrix.shape[1] if self.chunk_matrix is not None and len(self.chunk_matrix) else 0
        matrix = np.stack(flat).astype(np.float16) if flat else np.zeros((0, dim), np.float16)
        return matrix, offsets


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """The same question vector: the same object, or equal values (another caller's copy)."""
    return a is b or (a.shape == b.shape and bool(np.array_equal(a, b)))


# A language with fewer chunks than this is measured against the whole index instead: a handful of
# cosines gives no stable spread.
_MIN_GROUP = 8
# Cosine spreads below this are treated as this: near-identical chunks would otherwise give huge z.
_MIN_SPREAD = 0.01


def _group_stats(
    groups: np.ndarray, *scores: np.ndarray, pool_rows: np.ndarray | None = None
) -> list[_Stats]:
    """Per score array, each group's (mean, spread) for z-scores: over the rows of the group (the
    pooled rows for a small group), or over those of `pool_rows` only when given."""
    in_pool = np.ones(len(groups), bool)
    if pool_rows is not None:
        in_pool = np.zeros(len(groups), bool)
        in_pool[pool_rows] = True
    out = []
    for values in scores:
        stats: _Stats = {}
        base = values if pool_rows is None else values[pool_rows]
        for key in (True, False):
            rows = (groups == key) & in_pool
            pool = values[rows] if rows.sum() >= _MIN_GROUP else base
            if not len(pool):
                continue
            stats[key] = (pool.mean(), max(float(pool.std()), _MIN_SPREAD))  # the mean stays float32
        out.append(stats)
    return out
