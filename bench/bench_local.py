"""Embedded default at scale: index build speed and turn latency over a generated 10,000-chunk corpus.

    .venv/bin/python bench/bench_local.py [--chunks 10000] [--questions 200]

The corpus is made of real sentences (the shared evaluation corpora when present, else the sample
documents), shuffled into files of ten sections each; questions are sentences of the corpus with
their last words cut off. Prints MB/s of the build and p50 / p95 turn latency; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crag.factory import build_engine  # noqa: E402
from crag.search.local_index import LocalIndex  # noqa: E402
from crag.settings import CragSettings  # noqa: E402
from crag.text.sentences import split_sentences  # noqa: E402


def source_sentences() -> list[str]:
    folders = [ROOT.parent / "shared" / "eval" / n / "corpus" for n in ("jsquad-dev", "squad-dev")]
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


async def run_turns(settings: CragSettings, index: LocalIndex, questions: list[str]) -> list[float]:
    engine = build_engine(settings.model_copy(update={"cache_ttl": 0}), index)
    latencies = []
    for q in questions:
        started = time.perf_counter()
        await engine.run(q)
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    sentences = source_sentences()
    with tempfile.TemporaryDirectory() as tmp:
        docs, index_dir = Path(tmp) / "docs", Path(tmp) / "index"
        size = make_corpus(docs, args.chunks, rng, sentences)
        index, report = LocalIndex.build(docs, index_dir)
        print(f"corpus: {report.documents} files, {report.chunks} chunks, {size / 1e6:.1f} MB")
        print(f"build: {report.seconds:.1f} s = {size / 1e6 / report.seconds:.2f} MB/s")
        started = time.perf_counter()
        LocalIndex.load(index_dir)
        print(f"load: {(time.perf_counter() - started) * 1000:.0f} ms")
        questions = []
        for s in rng.sample(sentences, args.questions):
            words = s.split()
            questions.append(
                " ".join(words[: max(3, len(words) - 2)]) if len(words) > 4 else s[: len(s) * 2 // 3]
            )
        settings = CragSettings(CRAG_DOCS_DIR=str(docs), CRAG_INDEX_DIR=str(index_dir))
        latencies = asyncio.run(run_turns(settings, index, questions))
        q = statistics.quantiles(latencies, n=20)
        print(f"turns: {len(latencies)}, p50 {statistics.median(latencies):.1f} ms, p95 {q[18]:.1f} ms")


if __name__ == "__main__":
    main()
