"""Embedded-default turns per second with 1 and N worker processes, driven by wrk.

    .venv/bin/python tools/bench/bench_workers.py [--workers 1 2] [--connections 16] [--seconds 20]

bench_load.py drives the app from Python, with a fake Bot Connector in the same process: on a
2-core machine that load generator takes most of a core, so a second worker has no core to use and
`--workers 2` cannot show what it is worth. Here the load comes from wrk (C, Debian `wrk`) and the
activities ask for `deliveryMode: expectReplies`, so the bot's replies come back in the HTTP
response and no connector runs at all: the load costs a few percent of a core (printed).

Each request is a new conversation asking one of tests/data/sample_questions.jsonl in turn, on the
embedded default over sample_docs/ (hybrid retrieval once the vectors are ready, which the bench
waits for), with the answer cache off (CRAG_CACHE_TTL=0): every request is a full CRAG turn.
Prints, per worker count, turns/s, latency p50/p99, errors, the app's CPU per turn and wrk's CPU.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.bench_load import cpu_seconds, questions  # noqa: E402

from tests.servers.app_process import AppProcess  # noqa: E402

LUA = """
local questions = %(questions)s
local n = 0
request = function()
  n = n + 1
  local q = questions[(n %% #questions) + 1]
  local id = string.format("%%d-%%d", math.random(1, 1000000000), n)
  local body = '{"type":"message","id":"a' .. id .. '","channelId":"emulator",'
    .. '"serviceUrl":"http://127.0.0.1:9/","from":{"id":"u' .. id .. '","name":"U"},'
    .. '"recipient":{"id":"bot","name":"Bot"},"conversation":{"id":"c' .. id .. '"},'
    .. '"locale":"ja-JP","deliveryMode":"expectReplies","text":' .. q .. '}'
  return wrk.format("POST", nil, {["Content-Type"] = "application/json"}, body)
end
"""


def lua_script(path: Path) -> Path:
    # Each question as a JSON string literal (valid Lua too: double quotes, \\u escapes avoided).
    literals = ", ".join("[==[" + json.dumps(q, ensure_ascii=False) + "]==]" for q in questions())
    path.write_text(LUA % {"questions": "{" + literals + "}"}, "utf-8")
    return path


def wait_for_vectors(url: str, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with urllib.request.urlopen(url + "/api/health", timeout=5) as r:
            health = json.load(r)
        if health.get("providers", {}).get("grade") == "local-semantic":
            return
        time.sleep(1)
    raise RuntimeError("the index's vectors were not ready in time")


def run_wrk(url: str, script: Path, connections: int, seconds: int) -> tuple[str, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{seconds}s",
            "--latency",
            "--timeout",
            "30s",
            "-s",
            str(script),
            url,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out, cpu


def figure(pattern: str, text: str) -> str:
    match = re.search(pattern, text, re.MULTILINE)
    return match.group(1) if match else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (Debian: apt-get install wrk)")
    rates: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        script = lua_script(Path(tmp) / "turns.lua")
        for workers in args.workers:
            options = ["--workers", str(workers)] if workers > 1 else []
            app = AppProcess(Path(tmp) / f"w{workers}", ROOT / "sample_docs", *options, CRAG_CACHE_TTL="0")
            Path(tmp, f"w{workers}").mkdir()
            app.start()
            assert app.proc is not None
            try:
                wait_for_vectors(app.url)
                url = app.url + "/api/messages"
                run_wrk(url, script, args.connections, args.warmup)
                cpu_before = cpu_seconds(app.proc.pid)
                out, wrk_cpu = run_wrk(url, script, args.connections, args.seconds)
                app_cpu = cpu_seconds(app.proc.pid) - cpu_before
            finally:
                app.stop()
            rate = float(figure(r"Requests/sec:\s+([\d.]+)", out))
            total = int(figure(r"(\d+) requests in", out))
            errors = figure(r"Non-2xx or 3xx responses: (\d+)", out)
            p50, p99 = figure(r"^\s+50%\s+(\S+)", out), figure(r"^\s+99%\s+(\S+)", out)
            sockets = figure(r"Socket errors: (.*)", out) if "Socket errors" in out else "none"
            rates[workers] = rate
            print(
                f"{workers} worker(s), {args.connections} connections, {args.seconds} s: {rate:.1f} turns/s, "
                f"p50 {p50}, p99 {p99}, non-2xx {errors if errors != '?' else 0}, socket errors {sockets}; "
                f"app CPU {app_cpu / max(1, total) * 1000:.0f} ms per turn "
                f"({app_cpu / args.seconds:.0%} of a core); wrk CPU {wrk_cpu / args.seconds:.0%} of a core",
                flush=True,
            )
    if 1 in rates:
        for workers, rate in rates.items():
            if workers != 1:
                print(f"{workers} workers / 1: {rate / rates[1]:.2f}x")


if __name__ == "__main__":
    main()
