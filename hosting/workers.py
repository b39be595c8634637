"""`python app.py --workers N`: N processes of the app serving one port, so every core answers.

One Python process uses one core: under 50 concurrent conversations the app reached ~100 % of one
core while the other stayed idle. The supervisor (this module, in the process the user started)
first opens the local index and computes its vectors, so the workers find both on disk and start
serving at once instead of each building the same thing. It then starts N `python app.py`
processes with CRAG_WORKER_ID set; each binds HOST:PORT with SO_REUSEPORT and the kernel spreads
connections across them. A worker that dies is restarted; SIGINT or SIGTERM stops them all.

Shared between the workers: conversation state and ratings (the SQLite files, whose writers wait
for each other's locks, or Blob / PostgreSQL), and the index folder (a change is re-indexed once:
the build lock in crag/ingest/local_target.py; the others load the result). Per worker: the answer
cache (CRAG_CACHE_URL shares one in Redis) and the local Direct Line, which is therefore off.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from crag.runtime.handle import EngineHandle, uses_local_index
from hosting.app_settings import BotSettings

log = logging.getLogger("workers")

WORKER_ID = "CRAG_WORKER_ID"  # set in a worker's environment: it serves, never supervises
# Set by the supervisor when each worker keeps to one core: the worker's core, and every core the
# supervisor could use (what a pinned worker's index-build helpers get back: crag/ingest/term_pool.py).
PIN_CORE = "CRAG_PIN_CORE"
CPUS = "CRAG_CPUS"
# A worker that exits this soon after starting, twice running, will not come up (a port taken by a
# process without SO_REUSEPORT, a bad setting): stop rather than restart it forever.
EARLY_EXIT_S = 10.0


def _app_script() -> Path:
    """The entry module's file (app.py), found as Python would import it: beside the code in a
    checkout, in site-packages when installed. Workers run it as a script, as `python app.py` is."""
    spec = importlib.util.find_spec("app")
    if spec is None or spec.origin is None:
        raise RuntimeError("the entry module app.py is not importable")
    return Path(spec.origin)


def is_worker() -> bool:
    return bool(os.environ.get(WORKER_ID))


def cores_to_pin(workers: int, cores: set[int]) -> list[int] | None:
    """The core for each worker when there is one worker per core, else None (the kernel places them).

    Measured with `bench_workers.py --workers 2` on 2 cores, pinned and not pinned in turn, three pairs:
    117.1 / 111.8, 118.6 / 113.0, 107.9 / 102.1 turns/s (+5 %), p99 230-272 ms against 294-808 ms: a
    worker that stays on its core keeps its caches warm. With fewer workers than cores nothing is pinned.
    This cannot see other work on the machine: where some runs on the same cores, a worker held to a
    busy core could not move away, and CRAG_PIN_WORKERS=false is the better setting.
    """
    return sorted(cores) if workers == len(cores) > 1 else None


def pin_this_worker() -> None:
    """In a worker the supervisor gave a core (CRAG_PIN_CORE): keep to it, and every thread and
    process it starts with it, unless they ask for more (CRAG_CPUS)."""
    core = os.environ.get(PIN_CORE)
    if not core or not is_worker() or not hasattr(os, "sched_setaffinity"):
        return
    try:
        os.sched_setaffinity(0, {int(core)})
    except (OSError, ValueError) as exc:  # a core taken away since: run unpinned
        log.warning("could not keep this worker to core %s: %s", core, exc)


async def prepare(settings: BotSettings) -> bool:
    """Build (or load) the local index and its vectors on disk, once, before the workers start.
    False when the index cannot be opened (the reason is logged)."""
    if not uses_local_index(settings):
        return True
    handle = EngineHandle(settings.model_copy(update={"watch_docs": False}), settings.docs_url)
    try:
        await handle.open(embed_in_background=False)
        if handle.error:
            return False
        log.info("computing the index's vectors once for all workers (cached for later starts)")
        await handle.embed()
        return True
    finally:
        await handle.close()


def supervise(settings: BotSettings, workers: int) -> int:
    """Run `workers` app processes until a signal stops them; the exit code for the command."""
    if settings.state_storage == "memory":
        print(
            "STATE_STORAGE=memory keeps each worker's conversations apart: use sqlite (default), blob or "
            "cosmos with several workers",
            file=sys.stderr,
        )
        return 2
    if not asyncio.run(prepare(settings)):
        print("the local index could not be opened; see the log above", file=sys.stderr)
        return 1
    # A core or core list inherited from a process that started this one is not ours to apply.
    env = {k: v for k, v in os.environ.items() if k not in (PIN_CORE, CPUS)}
    env["CRAG_WORKERS"] = str(workers)
    available = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    cores = cores_to_pin(workers, available) if settings.pin_workers else None
    if cores is not None:
        env[CPUS] = ",".join(map(str, cores))
        log.info("one worker per core: each keeps to its own (CRAG_PIN_WORKERS=false to let them move)")
    procs: dict[int, tuple[subprocess.Popen[bytes], float]] = {}
    early: dict[int, int] = {}
    stopping = False

    def start(i: int) -> None:
        pinned = {PIN_CORE: str(cores[i])} if cores is not None else {}
        script = str(_app_script())
        proc = subprocess.Popen([sys.executable, script], env={**env, WORKER_ID: str(i + 1), **pinned})
        procs[i] = (proc, time.monotonic())
        log.info("worker %d started (pid %d)", i + 1, proc.pid)

    def stop(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        log.info("stopping %d workers (%s)", len(procs), signal.Signals(signum).name)
        for proc, _ in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    for i in range(workers):
        start(i)
    log.info("%d workers serving http://%s:%d", workers, settings.bind_host, settings.port)
    code = 0
    while not stopping:
        time.sleep(0.5)
        for i, (proc, started) in list(procs.items()):
            if proc.poll() is None or stopping:
                continue
            early[i] = early.get(i, 0) + 1 if time.monotonic() - started < EARLY_EXIT_S else 0
            if early[i] >= 2:
                log.error(
                    "worker %d exited with %s twice right after starting; stopping", i + 1, proc.returncode
                )
                code = 1
                stop(signal.SIGTERM, None)
                break
            log.warning("worker %d exited with %s; restarting it", i + 1, proc.returncode)
            start(i)
    for proc, _ in procs.values():
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return code
