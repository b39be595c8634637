"""What tracing costs a turn: the same questions with tracing off and with every span exported over
OTLP/HTTP (the real exporter, batched) to a fake collector on 127.0.0.1.

    .venv/bin/python tools/bench/bench_tracing.py [--rounds 5]

The embedded default (local index of sample_docs, lexical retrieval, local grader and composer:
the cheapest turns, so the overhead is at its largest share), answer cache off. Off and on
alternate question by question, so load on the machine falls on both alike. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from crag.config.engine_settings import CragSettings
from crag.config.tracing import TracingSettings
from crag.runtime.factory import build_engine, open_local_index
from crag.tracing import spans
from crag.tracing.export import configure_tracing
from tests.fakes.otlp import FakeCollector

ROOT = Path(__file__).resolve().parents[2]


async def main_async(rounds: int) -> None:
    questions = [
        json.loads(line)["question"]
        for line in (ROOT / "tests" / "data" / "sample_questions.jsonl").read_text("utf-8").splitlines()
        if line.strip()
    ]
    collector = FakeCollector()
    await collector.start()
    with tempfile.TemporaryDirectory() as tmp:
        settings = CragSettings(
            CRAG_DOCS_DIR=str(ROOT / "sample_docs"),
            CRAG_INDEX_DIR=str(Path(tmp) / "index"),
            CRAG_EMBEDDINGS="off",
            CRAG_CACHE_TTL=0,
            OPENAI_API_KEY="",
            AZURE_OPENAI_ENDPOINT="",
            AZURE_SEARCH_ENDPOINT="",
            SERPAPI_API_KEY="",
        )
        index, _ = open_local_index(settings)
        engine = build_engine(settings, index)
        export = configure_tracing(TracingSettings(OTEL_EXPORTER_OTLP_ENDPOINT=collector.url))
        assert export is not None
        provider = export.provider
        spans.install(None)
        off: list[float] = []
        on: list[float] = []
        for q in questions[:3]:  # warm up both paths
            await engine.run(q)
        for _ in range(rounds):
            for q in questions:
                for install, sink in ((None, off), (provider, on)):
                    spans.install(install)
                    started = time.perf_counter()
                    await engine.run(q)
                    sink.append((time.perf_counter() - started) * 1000)
        spans.install(provider)
        await export.close()
        await engine.close()
    await collector.stop()
    turns = len([s for s in collector.spans if s.name == "crag.turn"])
    print(f"{len(off)} turns each way ({len(questions)} questions x {rounds}); {turns} turn spans exported")
    for name, values in (("off", off), ("on", on)):
        p95 = statistics.quantiles(values, n=20)[18]
        mean, median = statistics.fmean(values), statistics.median(values)
        print(f"tracing {name:<3}  mean {mean:7.2f} ms  median {median:7.2f} ms  p95 {p95:7.2f} ms")
    deltas = [b - a for a, b in zip(off, on, strict=True)]
    mean_delta = statistics.fmean(deltas)
    print(
        f"on - off per turn: mean {mean_delta:+.3f} ms, median {statistics.median(deltas):+.3f} ms "
        f"({mean_delta / statistics.fmean(off):+.1%} of the mean turn)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(main_async(parser.parse_args().rounds))


if __name__ == "__main__":
    main()
