"""Many conversations at once against one app process, with the fake services on loopback.

    .venv/bin/python tools/bench/bench_load.py [--conversations 50] [--turns 3] [--llm-ms 300]
    .venv/bin/python tools/bench/bench_load.py --embedded [--workers 2]

Starts the real app (`python app.py`) on fake OpenAI, Azure AI Search and SerpAPI with latency and a
fake Bot Connector (or, with --embedded, on the embedded default over sample_docs/: no services, the
CPU is the limit, which is what --workers addresses); measures one user asking questions one after
another, then N conversations asking at the same time. Prints turns per second, p50 / p95 latency,
errors, and the p95 ratio. The model-call bound is raised for the run (CRAG_LLM_CONCURRENCY): a
real deployment sets it to what its quota allows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))  # the `bench` package beside this

from bench.bench_turns import FIXTURES, service_env, settings_for  # noqa: E402
from bench.latency_fakes import FakeAzureSearch, SlowOpenAI, SlowSerpApi  # noqa: E402

from crag.ingest.azure_target import ingest_azure  # noqa: E402
from tests.fakes.bot_connector import FakeConnector, card_of, make_activity  # noqa: E402
from tests.servers.app_process import AppProcess  # noqa: E402


def questions() -> list[str]:
    path = ROOT / "tests" / "data" / "sample_questions.jsonl"
    return [json.loads(line)["question"] for line in path.read_text("utf-8").splitlines() if line.strip()]


async def turn(
    session: aiohttp.ClientSession, app: AppProcess, connector: FakeConnector, conv: str, q: str
) -> float:
    activity = make_activity(connector.url, text=q, conversation_id=conv)
    started = time.perf_counter()
    async with session.post(app.url + "/api/messages", json=activity) as resp:
        if resp.status != 201:
            raise RuntimeError(f"HTTP {resp.status}")
    elapsed = (time.perf_counter() - started) * 1000
    replies = [
        a
        for a in connector.activities
        if a.get("replyToId") == activity["id"] or a.get("_path", "").endswith(activity["id"])
    ]
    if not any(card_of(a) for a in replies):
        raise RuntimeError("no answer card")
    return elapsed


def cpu_seconds(pid: int) -> float:
    """CPU time of the process and its children (the workers of `--workers N`)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return own + sum(cpu_seconds(int(c)) for c in children)


def summary(name: str, latencies: list[float], seconds: float, errors: int) -> float:
    p95 = statistics.quantiles(latencies, n=20)[18] if len(latencies) > 1 else latencies[0]
    print(
        f"{name:<24} turns {len(latencies):>4}  {len(latencies) / seconds:>6.1f}/s  "
        f"p50 {statistics.median(latencies):>6.0f} ms  p95 {p95:>6.0f} ms  errors {errors}"
    )
    return p95


async def main_async(args: argparse.Namespace) -> None:
    llm, search, serp = SlowOpenAI(args.llm_ms), FakeAzureSearch(), SlowSerpApi(FIXTURES, args.web_ms)
    connector = FakeConnector()
    servers = [connector] if args.embedded else [llm, search, serp, connector]
    for server in servers:
        await server.start()
    if args.embedded:
        env = {"CRAG_CACHE_TTL": "0"}
    else:
        serp.current = "w"
        settings = settings_for(llm, search, serp)
        assert await ingest_azure(ROOT / "sample_docs", settings) == 0
        search.delay_s = args.search_ms / 1000
        env = {
            **service_env(llm, search, serp),
            "CRAG_LLM_CONCURRENCY": "256",
            "CRAG_GRADE_BATCH": "true" if args.batch else "false",
        }
    qs = questions()
    options = ["--workers", str(args.workers)] if args.workers > 1 else []
    print(f"{'embedded default' if args.embedded else 'fake services'}, {args.workers} worker(s)", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        app = AppProcess(Path(tmp), ROOT / "sample_docs", *options, **env)
        app.start()
        assert app.proc is not None
        print(f"app pid {app.proc.pid}", flush=True)
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
                single: list[float] = []
                started = time.perf_counter()
                for i in range(args.single):
                    single.append(await turn(session, app, connector, "single", qs[i % len(qs)]))
                single_p95 = summary("one user", single, time.perf_counter() - started, 0)

                async def conversation(c: int) -> tuple[list[float], int]:
                    got, errors = [], 0
                    for t in range(args.turns):
                        try:
                            got.append(
                                await turn(session, app, connector, f"conv-{c}", qs[(c + t) % len(qs)])
                            )
                        except Exception as exc:
                            errors += 1
                            print(f"error in conv-{c}: {exc}", file=sys.stderr)
                    return got, errors

                assert app.proc is not None
                cpu_before = cpu_seconds(app.proc.pid)
                own_before = time.process_time()
                started = time.perf_counter()
                results = await asyncio.gather(*(conversation(c) for c in range(args.conversations)))
                seconds = time.perf_counter() - started
                cpu = cpu_seconds(app.proc.pid) - cpu_before
                own = time.process_time() - own_before
                many = [x for got, _ in results for x in got]
                errors = sum(e for _, e in results)
                many_p95 = summary(f"{args.conversations} conversations", many, seconds, errors)
                print(f"p95 ratio (concurrent / one user): {many_p95 / single_p95:.2f}")
                print(
                    f"app CPU (all workers): {cpu:.1f} s over {seconds:.1f} s = "
                    f"{cpu / seconds:.0%} of a core, {cpu * 1000 / max(1, len(many)):.0f} ms per turn"
                )
                # The load generator and the fakes share the machine's cores with the app: when this
                # process nears a core of its own, the latencies measure it as much as the app.
                print(f"this process (client and fakes): {own / seconds:.0%} of a core")
        finally:
            app.stop()
            for server in servers:
                await server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--single", type=int, default=20)
    parser.add_argument("--llm-ms", type=float, default=300)
    parser.add_argument("--search-ms", type=float, default=50)
    parser.add_argument("--web-ms", type=float, default=500)
    parser.add_argument("--batch", action="store_true", help="grade five chunks per model call")
    parser.add_argument("--embedded", action="store_true", help="the embedded default, no (fake) services")
    parser.add_argument("--workers", type=int, default=1, help="app.py --workers N")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
