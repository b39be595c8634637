"""The local index's vectors, computed in the background: lexical answers at once, hybrid once every
chunk has its vector. A rebuild stops the computation (what it computed is saved and reused) and
resumes it on the new index."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from crag.retrieval.search.local_index import LocalIndex

log = logging.getLogger("crag.runtime.handle")


class BackgroundEmbedding:
    def __init__(self) -> None:
        self.task: asyncio.Task[bool] | None = None
        self.error = ""
        self.in_background = True  # False: a caller (the ingest CLI) waits for run() itself

    def start(self, index: LocalIndex) -> None:
        """Compute the index's vectors in the background, if it has an embedder."""
        if index.vectors is not None and self.in_background:
            self.task = asyncio.create_task(self.run(index))

    async def stop(self) -> None:
        task, self.task = self.task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def resume(self, index: LocalIndex | None) -> None:
        """Compute the current index's missing vectors in the background (again), as at start."""
        if index is None or index.vectors is None or index.vectors.ready or not self.in_background:
            return
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self.run(index))

    async def wait(self) -> None:
        """Wait for the background computation started by start(), if any."""
        if self.task is not None:
            await self.task

    async def run(self, index: LocalIndex | None, progress: Callable[[int, int], None] | None = None) -> bool:
        """Compute the local index's missing vectors (those of unchanged texts are reused); False when
        embedding failed (retrieval then stays lexical). progress hears (texts done, texts in all)."""
        vectors = index.vectors if index is not None else None
        if index is None or vectors is None:
            return False
        step = [0]

        def log_progress(done: int, total: int) -> None:
            if total and done * 10 // total > step[0]:
                step[0] = done * 10 // total
                log.info("embedding the index: %d/%d texts", done, total)

        try:
            await vectors.build(progress or log_progress)
        except Exception as exc:  # the embedder's own failure; its text may hold a key
            self.error = exc.__class__.__name__
            log.warning("index vectors unavailable (%s); local search stays lexical", self.error)
            return False
        # Answers cached before are lexical ones: a new version lets the cache forget them.
        index.version = f"{index.version}+{vectors.model}"
        log.info(
            "index vectors ready (%s): %d texts, %d embedded now, %.1fs; hybrid retrieval on, and"
            " answers from the documents alone (before: 'check the sources', CRAG_WORDS_ONLY_ANSWERS)",
            vectors.model,
            vectors.total,
            vectors.embedded,
            vectors.seconds,
        )
        return True
