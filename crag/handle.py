"""The engine and the index it answers from, opened once for an app: the one wiring point the bot,
its health endpoint and the Web Chat page use (`crag.factory` builds the pieces).

Opening reads (or builds) the local index off the event loop, builds the engine, and embeds the
index in the background: lexical answers at once, hybrid once every chunk has its vector.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from crag.engine import CragEngine
from crag.factory import build_engine, open_local_index, search_provider, uses_local_index
from crag.ingest.local_target import BuildReport, Progress
from crag.search.local_index import LocalIndex
from crag.settings import CragSettings

log = logging.getLogger(__name__)

__all__ = ["EngineHandle", "IndexInfo", "uses_local_index"]


@dataclass
class IndexInfo:
    documents: int = 0
    chunks: int = 0
    built: bool = False  # built on this start (False: loaded from disk)
    skipped: list[str] = field(default_factory=list)
    seconds: float = 0.0
    remote: bool = False  # documents in a remote index (Azure AI Search): counts are not known here
    provider: str = "local"  # the search provider's name
    files: frozenset[str] = frozenset()  # relative paths the local index holds: what /docs/ may serve


class EngineHandle:
    def __init__(self, settings: CragSettings, docs_url: str = "") -> None:
        self.settings = settings
        self.docs_url = docs_url  # the base of citation links to the local documents
        self.engine: CragEngine | None = None
        self.index = IndexInfo()
        self.error: str = ""
        self._ready = asyncio.Event()
        self.local_index: LocalIndex | None = None
        self.report: BuildReport | None = None  # the build of this open (None: loaded as it was)
        self.embed_error = ""
        self.vector_task: asyncio.Task[bool] | None = None

    @property
    def ready(self) -> bool:
        return self.engine is not None

    async def open(self, progress: Progress | None = None, embed_in_background: bool = True) -> None:
        """Open (or build) the local index off the event loop, then create the engine. progress hears
        each file read while the index is built; the vectors are then computed in the background (or
        by `embed()`, for a caller that waits for them)."""
        settings = self.settings
        try:
            search_name, search = search_provider(settings)
        except ValueError as exc:
            self.error = str(exc)
            log.error("cannot start the engine: %s", exc)
            return
        if not search.USES_LOCAL_INDEX:
            # Documents live in a remote index (Azure AI Search: `python -m crag.ingest --target azure`).
            if not self._build_engine(None):
                return
            self.index = IndexInfo(remote=True, provider=search_name)
            log.info("engine ready on the %s search provider", search_name)
            self._ready.set()
            return

        def log_progress(name: str, done: int, total: int) -> None:
            if total and (done == total or done % max(1, total // 10) == 0):
                log.info("indexing documents: %d/%d %s", done, total, name)

        try:
            index, report = await asyncio.to_thread(
                open_local_index, settings, self.docs_url, progress or log_progress
            )
        except Exception as exc:
            self.error = f"index unavailable: {exc.__class__.__name__}"
            log.exception("could not open the local index from %s", settings.docs_dir)
            return
        self.index = IndexInfo(
            documents=index.documents,
            chunks=index.size,
            built=report is not None,
            skipped=list(index.skipped),
            seconds=round(report.seconds, 2) if report else 0.0,
            files=frozenset(chunk.file for chunk in index.chunks),
        )
        if not self._build_engine(index):
            return
        self.local_index = index
        self.report = report
        if index.vectors is not None and embed_in_background:
            # Served lexically at once; retrieval turns hybrid when every chunk has its vector.
            self.vector_task = asyncio.create_task(self.embed())
        log.info(
            "index ready: %d documents, %d chunks (%s)",
            self.index.documents,
            self.index.chunks,
            f"built in {report.seconds:.1f}s" if report else "loaded",
        )
        for reason in self.index.skipped:
            log.warning("skipped: %s", reason)
        self._ready.set()

    async def embed(self, progress: Callable[[int, int], None] | None = None) -> bool:
        """Compute the local index's missing vectors (those of unchanged texts are reused); False when
        embedding failed (retrieval then stays lexical). progress hears (texts done, texts in all)."""
        index = self.local_index
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
            self.embed_error = exc.__class__.__name__
            log.warning("index vectors unavailable (%s); local search stays lexical", self.embed_error)
            return False
        # Answers cached before are lexical ones: a new version lets the cache forget them.
        index.version = f"{index.version}+{vectors.model}"
        log.info(
            "index vectors ready (%s): %d texts, %d embedded now, %.1fs; hybrid retrieval on",
            vectors.model,
            vectors.total,
            vectors.embedded,
            vectors.seconds,
        )
        return True

    async def vectors_built(self) -> None:
        """Wait for the background embedding started by open(), if any."""
        if self.vector_task is not None:
            await self.vector_task

    def status(self) -> tuple[int, dict[str, object]]:
        """/api/health's details: HTTP status and what the bot runs on (index, providers, cache)."""
        engine = self.engine
        if engine is None:
            return 503, {"status": "error" if self.error else "indexing", "detail": self.error}
        return 200, {
            "status": "ok",
            "index": f"{self.index.provider}-search" if self.index.remote else "local",
            "documents": None if self.index.remote else self.index.documents,
            "chunks": None if self.index.remote else self.index.chunks,
            "skipped_documents": len(self.index.skipped),
            "providers": engine.providers,
            "thresholds": {"upper": engine.config.upper, "lower": engine.config.lower},
            "research_rounds": engine.config.research_rounds,
            "cache": self.cache_status(),
            "vectors": self.vector_status(),
        }

    def cache_status(self) -> dict[str, object]:
        cache = self.engine.cache if self.engine is not None else None
        if cache is None:
            return {"enabled": False}
        stats = cache.stats
        return {
            "enabled": True,
            "entries": len(cache),
            "hits": stats.hits,
            "misses": stats.misses,
            "hit_rate": round(stats.hit_rate, 3),
        }

    def vector_status(self) -> dict[str, object]:
        """For /api/health: the local index's vectors (progress), or why there are none."""
        index = self.local_index
        if index is None:
            return {"enabled": False}
        if index.vectors is None:
            out: dict[str, object] = {"enabled": False}
            if index.vectors_notice:
                out["notice"] = f"lexical only: {index.vectors_notice}"
            return out
        return {"enabled": True, **index.vectors.status()}

    def _build_engine(self, index: LocalIndex | None) -> bool:
        """Create the engine; a configuration the engine refuses is kept as the runtime's error."""
        try:
            self.engine = build_engine(self.settings, index)
        except ValueError as exc:
            self.error = str(exc)
            log.error("cannot start the engine: %s", exc)
            return False
        return True

    async def wait_ready(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def close(self) -> None:
        if self.vector_task is not None and not self.vector_task.done():
            self.vector_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.vector_task
        if self.engine is not None:
            await self.engine.close()
