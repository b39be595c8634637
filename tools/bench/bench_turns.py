"""CRAG turn latency with remote services, against a sequential baseline, in one run.

    .venv/bin/python tools/bench/bench_turns.py [--n 10] [--llm-ms 300] [--search-ms 50] [--web-ms 500]

Fake OpenAI (300 ms a call), fake Azure AI Search (50 ms) and fake SerpAPI (500 ms) on loopback;
the real engine answers N questions per branch (the fake grader decides the branch). The baseline
is the source flow: rewrite, then each chunk graded one after another, then web rewrite and web
search, then generation. Prints median / p95 latency, LLM calls per turn, the speed-up and the
ratio to the critical-path limit: rewrite + search + one grading round + generation, with the web
path overlapped (the web search from the turn's start; with --web-rewrite, the model's web query
and then the search). With --grader local the relevance model grades instead of the fake model (the
documents decide the branch; it prints which each question reached). Nothing is asserted: numbers for
the notes.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tools/: the `bench` package beside this

from bench.latency_fakes import FakeAzureSearch, SlowOpenAI, SlowSerpApi

from crag.config.engine_settings import CragSettings
from crag.ingest.azure_target import ingest_azure
from crag.runtime.factory import build_engine

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = {
    "correct": "What is the monthly remote work allowance",
    "ambiguous": "How fast is the guest Wi-Fi",
    "incorrect": "Who won the world cup",
}
SCORES = {"correct": 0.95, "ambiguous": 0.5, "incorrect": 0.1}
FIXTURES = {
    "w": {
        "question": "web",
        "serpapi": {
            "organic_results": [{"title": "Web", "link": "https://web.example/", "snippet": "From the web."}]
        },
    }
}


def service_env(llm: SlowOpenAI, search: FakeAzureSearch, serp: SlowSerpApi) -> dict[str, str]:
    """The settings (as environment variables) that point the bot at the fakes."""
    return {
        "OPENAI_API_KEY": "bench",
        "OPENAI_BASE_URL": llm.url + "/v1",
        "AZURE_SEARCH_ENDPOINT": search.url,
        "AZURE_SEARCH_API_KEY": search.api_key,
        "AZURE_SEARCH_INDEX": "bench",
        "SERPAPI_API_KEY": "bench",
        "SERPAPI_BASE_URL": serp.url,
        "CRAG_CACHE_TTL": "0",
    }


def settings_for(llm: SlowOpenAI, search: FakeAzureSearch, serp: SlowSerpApi, **extra: Any) -> CragSettings:
    env: dict[str, Any] = {
        **service_env(llm, search, serp),
        "CRAG_REFINE": False,  # both flows without refinement: the comparison is about the flow (--refine)
        "CRAG_TOP_K": 10,
    }
    env.update(extra)
    return CragSettings(**env)


# The branches each question reached (with --grader local they are the relevance model's).
reached: dict[str, set[str]] = {}


async def measure(settings: CragSettings, n: int, llm: SlowOpenAI) -> dict[str, tuple[list[float], float]]:
    engine = build_engine(settings, None)
    out: dict[str, tuple[list[float], float]] = {}
    try:
        for branch, question in QUESTIONS.items():
            score = SCORES[branch]
            llm.grade_override = lambda q, p, s=score: s  # type: ignore[misc]
            latencies, calls = [], 0
            for i in range(n):
                started = time.perf_counter()
                result = await engine.run(f"{question} ({i})?")
                latencies.append((time.perf_counter() - started) * 1000)
                calls += result.llm_calls
                # With the local grader the documents decide the branch, not the fake's grade.
                if settings.grader in ("auto", "llm"):
                    assert result.branch.value == branch, (branch, result.branch)
                reached.setdefault(branch, set()).add(result.branch.value)
            out[branch] = (latencies, calls / n)
    finally:
        await engine.close()
    return out


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[18] if len(values) >= 2 else values[0]


async def main_async(args: argparse.Namespace) -> None:
    llm, search, serp = (
        SlowOpenAI(args.llm_ms, args.per_token_ms),
        FakeAzureSearch(),
        SlowSerpApi(FIXTURES, args.web_ms),
    )
    for server in (llm, search, serp):
        await server.start()
    serp.current = "w"  # every web search finds the same page
    if args.short_extract:
        # The fake has no model: its extract is the whole passage, streamed a word at a time by a
        # server in this benchmark's own event loop. A model copies a few sentences.
        llm.extract_override = lambda passage: passage.split(". ")[0]
    try:
        base = settings_for(llm, search, serp)
        # Ingest (embeddings need none: keyword mode), then add the search latency.
        assert await ingest_azure(ROOT / "sample_docs", base) == 0
        search.delay_s = args.search_ms / 1000
        optimized = await measure(
            settings_for(
                llm,
                search,
                serp,
                CRAG_GRADE_BATCH=args.batch,
                CRAG_WEB_REWRITE=args.web_rewrite,
                CRAG_REFINE=args.refine,
                CRAG_GRADER=args.grader,
            ),
            args.n,
            llm,
        )
        # The source flow: one grading call after another, the model's web query, then the search.
        sequential = await measure(
            settings_for(
                llm,
                search,
                serp,
                CRAG_GRADE_CONCURRENCY=1,
                CRAG_SPECULATIVE_WEB=False,
                CRAG_WEB_REWRITE=True,
                CRAG_FOLLOWUPS=False,
                CRAG_GRADER=args.grader,
            ),
            args.n,
            llm,
        )
    finally:
        for server in (llm, search, serp):
            await server.stop()
    doc_path = args.llm_ms + args.search_ms + args.llm_ms  # rewrite, search, one grading round
    web_path = (args.llm_ms if args.web_rewrite else 0) + args.web_ms  # [web rewrite,] web search
    print(
        f"fakes: LLM {args.llm_ms:.0f} ms/call, search {args.search_ms:.0f} ms, web {args.web_ms:.0f} ms; "
        f"top-k 10, {args.n} questions per branch"
    )
    print(
        f"{'branch':<10} {'limit':>6} {'median':>7} {'p95':>7} {'x limit':>8} {'calls':>6} | "
        f"{'seq med':>8} {'seq p95':>8} {'calls':>6} | {'speed-up':>8}"
    )
    for branch in QUESTIONS:
        limit = (max(doc_path, web_path) if branch != "correct" else doc_path) + args.llm_ms
        lat, calls = optimized[branch]
        seq, seq_calls = sequential[branch]
        med, seq_med = statistics.median(lat), statistics.median(seq)
        print(
            f"{branch:<10} {limit:>6.0f} {med:>7.0f} {p95(lat):>7.0f} {med / limit:>8.2f} {calls:>6.1f} | "
            f"{seq_med:>8.0f} {p95(seq):>8.0f} {seq_calls:>6.1f} | {seq_med / med:>7.2f}x"
        )
    if args.grader == "local":
        print("grader: the relevance model; branches reached:", {b: sorted(r) for b, r in reached.items()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--llm-ms", type=float, default=300)
    parser.add_argument("--per-token-ms", type=float, default=0)
    parser.add_argument("--search-ms", type=float, default=50)
    parser.add_argument("--web-ms", type=float, default=500)
    parser.add_argument("--batch", action="store_true", help="grade five chunks per model call")
    parser.add_argument("--web-rewrite", action="store_true", help="the model writes the web query")
    parser.add_argument("--refine", action="store_true", help="refinement on, as by default with a model")
    parser.add_argument(
        "--grader",
        choices=("llm", "local"),
        default="llm",
        help="local: the relevance model grades (CRAG_GRADER=local); the fake model rewrites and answers",
    )
    parser.add_argument(
        "--short-extract",
        action="store_true",
        help="with --refine: extracts of one sentence, not the whole passage",
    )
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
