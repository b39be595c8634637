"""Grading time and turn time of the embedded default, by grader, over the sample documents.

    .venv/bin/python tools/bench/bench_grading.py [--questions 60] [--graders features local] [--rounds 2]

Opens the sample documents' index with its vectors (built first if needed, as the bot does), then asks
the first --questions questions of data/eval/sample-docs (one turn each, no history, no answer cache)
with each grader (CRAG_GRADER), --rounds times, and prints per grader and round the p50 / p95 of the
turn's grading time (every grading round of the turn, the engine's own timing: the passages of each
search, each part of a multi-part question, a re-search) and of the whole turn, and the branches
reached. The first question of each grader is asked once before timing (model load). Nothing is
asserted: numbers for the notes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from crag.config.engine_settings import CragSettings  # noqa: E402
from crag.runtime.handle import EngineHandle  # noqa: E402


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main_async(args: argparse.Namespace) -> None:
    questions = [
        json.loads(line)["question"]
        for line in (ROOT / "data" / "eval" / "sample-docs" / "questions.jsonl")
        .read_text("utf-8")
        .splitlines()
        if line.strip() and not json.loads(line).get("history")
    ][: args.questions]
    with tempfile.TemporaryDirectory() as tmp:
        base = {"CRAG_DOCS_DIR": str(ROOT / "sample_docs"), "CRAG_INDEX_DIR": tmp, "CRAG_CACHE_TTL": 0}
        print(
            f"{len(questions)} questions of data/eval/sample-docs over sample_docs/, with the index's vectors"
        )
        print(
            f"{'grader':<9} {'round':>5} {'grade p50':>10} {'grade p95':>10} "
            f"{'turn p50':>9} {'turn p95':>9}  branches"
        )
        for grader in args.graders:
            handle = EngineHandle(CragSettings(**base, CRAG_GRADER=grader, CRAG_WATCH_DOCS=False))
            await handle.open(embed_in_background=False)
            await handle.embed()
            engine = handle.engine
            assert engine is not None, handle.error
            await engine.run(questions[0])  # loads the model
            for r in range(args.rounds):
                grade, total, branches = [], [], Counter()
                for q in questions:
                    result = await engine.run(q)
                    grade.append(result.timings_ms.get("grade", 0.0))
                    total.append(result.timings_ms.get("total", 0.0))
                    branches[result.branch.value] += 1
                print(
                    f"{grader:<9} {r + 1:>5} {statistics.median(grade):>8.0f}ms {p(grade, 0.95):>8.0f}ms "
                    f"{statistics.median(total):>7.0f}ms {p(total, 0.95):>7.0f}ms  {dict(branches)}"
                )
            await handle.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--questions", type=int, default=60)
    parser.add_argument("--graders", nargs="+", default=["features", "local"], choices=["features", "local"])
    parser.add_argument("--rounds", type=int, default=2)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
