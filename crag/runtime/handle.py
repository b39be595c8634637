"""The engine and the index it answers from, opened once for an app: the one wiring point the bot,
its health endpoint and the Web Chat page use (`crag.runtime.factory` builds the pieces).

Opening reads (or builds) the local index off the event loop, builds the engine, and embeds the
index in the background: lexical answers at once, hybrid once every chunk has its vector.

With CRAG_WATCH_DOCS it then watches the documents folder: each burst of changes rebuilds the index
(only the changed files are read) and a new engine over it, swapped in whole. A turn reads
`handle.engine` once, so turns in flight finish on the old engine and new ones use the new; the new
engine's answer cache starts empty, so no answer from the old documents is served again.

With CRAG_SOURCE=sharepoint the documents come from a SharePoint library instead: the index the
last sync stored is opened (the first sync builds it), and a background task syncs the library,
swapping each changed index in the same way.

The handle owns the serving engine and index and swaps them; its parts live beside it: the
embedding in the background (embedding.py), the folder watcher (watcher.py), the SharePoint sync
(source_sync.py) and what /api/health reports of the index (index_info.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from crag.access.files import AccessFileError
from crag.config.engine_settings import CragSettings
from crag.engine import CragEngine
from crag.ingest.local_target import BuildReport, Progress
from crag.providers.graph.errors import GraphError
from crag.retrieval.search.local_index import LocalIndex
from crag.runtime.embedding import BackgroundEmbedding
from crag.runtime.factory import (
    build_engine,
    local_index_stale,
    open_local_index,
    search_provider,
    uses_local_index,
)
from crag.runtime.index_info import IndexInfo, WatchInfo, changes, index_info
from crag.runtime.source_sync import sync_loop, sync_once
from crag.runtime.watcher import watch_documents
from crag.text.bilingual import lexicon_status

if TYPE_CHECKING:
    from crag.ingest.sharepoint.schedule import SharePointSource

log = logging.getLogger(__name__)

# A replaced engine's connections are closed this long after the swap: turns that started on it
# finish first (a turn has no deadline of its own; model calls time out well within this).
RETIRE_GRACE_S = 300.0
REBUILD_FAILED = "re-indexing failed"

__all__ = ["EngineHandle", "IndexInfo", "uses_local_index"]


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
        self.embedding = BackgroundEmbedding()
        self.watch = WatchInfo()
        self.watch_task: asyncio.Task[None] | None = None
        self.stop_watching = asyncio.Event()
        self.watching = asyncio.Event()  # set once the folder is watched and caught up
        self.refresh_lock = asyncio.Lock()  # one rebuild or sync at a time, whoever asks
        self._retiring: set[asyncio.Task[None]] = set()  # replaced engines, closed after their grace
        self._version = ""  # the serving index's content version (embedding appends to index.version)
        self.failed = False  # the last rebuild failed: it is tried once more
        self.sharepoint: SharePointSource | None = None  # CRAG_SOURCE=sharepoint: the library synced
        self._remote_version = ""  # the Azure index's version as the last SharePoint sync left it

    @property
    def vector_task(self) -> asyncio.Task[bool] | None:
        return self.embedding.task

    @property
    def embed_error(self) -> str:
        return self.embedding.error

    async def open(self, progress: Progress | None = None, embed_in_background: bool = True) -> None:
        """Open (or build) the local index off the event loop, then create the engine. progress hears
        each file read while the index is built; the vectors are then computed in the background (or
        by `embed()`, for a caller that waits for them)."""
        try:
            search_name, search = search_provider(self.settings)
        except ValueError as exc:
            self.error = str(exc)
            log.error("cannot start the engine: %s", exc)
            return
        if self.settings.source == "sharepoint" and not self._open_sharepoint():
            return
        if not search.USES_LOCAL_INDEX:
            self._open_remote(search_name)
            return
        opened = await self._open_local(progress)
        if opened is None:
            return
        index, report = opened
        self.index = index_info(index)
        if not self._build_engine(index):
            return
        self._serve_local(index, report, embed_in_background)

    def _open_sharepoint(self) -> bool:
        """The SharePoint library to sync (False: its settings are refused, the error says why)."""
        try:
            self.sharepoint = _sharepoint_source(self.settings)
        except Exception as exc:  # GraphError: settings the client refuses (safe to show)
            self.error = f"SharePoint: {exc}"
            log.error("cannot open the SharePoint source: %s", exc)
            return False
        return True

    def _open_remote(self, search_name: str) -> None:
        """The engine over a remote index: documents live in it (Azure AI Search:
        `python -m crag.cli.ingest --target azure`)."""
        if self.sharepoint is not None:
            with contextlib.suppress(ValueError):  # bad search settings: the engine says so below
                self._remote_version = self.sharepoint.remote_version()
        if not self._build_engine(None):
            return
        self.index = IndexInfo(remote=True, provider=search_name)
        log.info("engine ready on the %s search provider", search_name)
        self._ready.set()
        self._start_sync(remote=True)

    async def _open_local(self, progress: Progress | None) -> tuple[LocalIndex, BuildReport | None] | None:
        """The local index, loaded or built (from the SharePoint library's last sync, or the folder);
        None when it cannot be had: the error says why."""

        def log_progress(name: str, done: int, total: int) -> None:
            if total and (done == total or done % max(1, total // 10) == 0):
                log.info("indexing documents: %d/%d %s", done, total, name)

        try:
            if self.sharepoint is not None:
                return await self.sharepoint.open_local()
            return await asyncio.to_thread(
                open_local_index, self.settings, self.docs_url, progress or log_progress
            )
        except GraphError as exc:  # the first sync of a library failed: say why, as it is safe to
            self.error = f"SharePoint: {exc}"
            log.error("could not sync the SharePoint library: %s", exc)
        except AccessFileError as exc:
            # The folder's permissions cannot be read: no index without them (never "allow all").
            self.error = str(exc)
            log.error("cannot start the engine: %s", exc)
        except Exception as exc:
            self.error = f"index unavailable: {exc.__class__.__name__}"
            log.exception("could not open the local index from %s", self.settings.docs_dir)
        return None

    def _serve_local(self, index: LocalIndex, report: BuildReport | None, embed_in_background: bool) -> None:
        """Serve the opened index: embed it, say what it holds, then watch or sync its documents."""
        settings = self.settings
        self.local_index = index
        self._version = index.version
        self.report = report
        self.embedding.in_background = embed_in_background
        # Served lexically at once; retrieval turns hybrid when every chunk has its vector.
        self.embedding.start(index)
        log.info(
            "index ready: %d documents, %d chunks (%s)",
            self.index.documents,
            self.index.chunks,
            f"built in {report.seconds:.1f}s" if report else "loaded",
        )
        for reason in self.index.skipped:
            log.warning("skipped: %s", reason)
        if settings.access_trimming and settings.access_unknown == "deny" and self.index.unknown_files:
            log.warning(
                "access trimming is on: %d of %d documents have no access rule and are denied to "
                "everyone (%s; CRAG_ACCESS_UNKNOWN=allow to let everyone read them)",
                len(self.index.unknown_files),
                self.index.documents,
                settings.access_path,
            )
        self._ready.set()
        if settings.watch_docs and self.sharepoint is None:
            self.watch = WatchInfo(enabled=True)
            self.watch_task = asyncio.create_task(watch_documents(self))
        self._start_sync(remote=False)

    def _start_sync(self, remote: bool) -> None:
        """Sync the SharePoint library in the background every CRAG_SHAREPOINT_SYNC_MINUTES."""
        if self.sharepoint is None or self.settings.sharepoint.sync_minutes <= 0:
            return
        self.watch = WatchInfo(enabled=True)
        self.watch_task = asyncio.create_task(sync_loop(self, remote))

    async def sync_sharepoint(self, remote: bool = False) -> float | None:
        """Sync the SharePoint library once and swap a changed index in (the scheduled task calls
        this; so may a test). Returns the Retry-After of a throttled sync."""
        return await sync_once(self, remote)

    def swap_remote(self, engine: CragEngine) -> None:
        """A new engine over the remote index (its answer cache keyed by the new version)."""
        old = self.engine
        if old is not None and old.cache is not None and engine.cache is not None:
            engine.cache.stats = old.cache.stats
        self.engine = engine
        self.watch.rebuilds += 1
        if old is not None:
            task = asyncio.create_task(_close_later(old, RETIRE_GRACE_S))
            self._retiring.add(task)
            task.add_done_callback(self._retiring.discard)

    async def refresh(self) -> bool:
        """Re-index the documents folder if it changed and swap the new index and engine in (True).
        False when nothing changed or the rebuild failed: the current index keeps serving."""
        if self.local_index is None or self.engine is None:
            return False
        async with self.refresh_lock:
            started = time.perf_counter()
            self.failed = False
            try:
                fingerprint = await asyncio.to_thread(
                    local_index_stale, self.settings, self.docs_url, self._version
                )
                if fingerprint is None:
                    # An event that changed nothing indexed (an editor's temporary file), or a
                    # failed change undone: the serving index matches the folder.
                    if self.watch.error.startswith(REBUILD_FAILED):
                        self.watch.error = ""
                    return False
                # The vectors being computed would be written into the folder the build replaces;
                # what they have computed is saved on cancellation and reused by the next build.
                await self.embedding.stop()
                # Loaded as stored when another process serving the folder has just built it.
                index, report = await asyncio.to_thread(
                    open_local_index, self.settings, self.docs_url, None, fingerprint
                )
                engine = build_engine(self.settings, index)
            except Exception as exc:
                self.failed = True
                # An access file's message says what to fix (file, rule, value) and holds no secret.
                reason = str(exc) if isinstance(exc, AccessFileError) else exc.__class__.__name__
                self.watch.error = f"{REBUILD_FAILED}: {reason}"
                log.warning(
                    "re-indexing %s failed (%s: %s); still serving the previous index",
                    self.settings.docs_dir,
                    exc.__class__.__name__,
                    exc,
                )
                self.embedding.resume(self.local_index)
                return False
            old = self.local_index
            self.swap(engine, index, report)
            seconds = time.perf_counter() - started
            added, changed, removed = changes(old.hashes, index.hashes)
            self.watch.last_change = f"+{len(added)} ~{len(changed)} -{len(removed)} files in {seconds:.1f}s"
            log.info(
                "documents re-indexed in %.1fs: %d added %s, %d changed %s, %d removed %s; "
                "now %d documents, %d chunks",
                seconds,
                len(added),
                added[:5],
                len(changed),
                changed[:5],
                len(removed),
                removed[:5],
                index.documents,
                index.size,
            )
            for reason in index.skipped:
                if reason not in old.skipped:
                    log.warning("skipped: %s", reason)
            return True

    def swap(self, engine: CragEngine, index: LocalIndex, report: BuildReport | None) -> None:
        """The new index and engine replace the old in one step (no await in between)."""
        old = self.engine
        if old is not None and old.cache is not None and engine.cache is not None:
            engine.cache.stats = old.cache.stats  # the counts on /api/health span the process's life
        self.engine = engine
        self.local_index = index
        self._version = index.version
        self.report = report
        self.index = index_info(index)
        self.watch.rebuilds += 1
        self.watch.error = ""
        if old is not None:
            task = asyncio.create_task(_close_later(old, RETIRE_GRACE_S))
            self._retiring.add(task)
            task.add_done_callback(self._retiring.discard)
        self.embedding.resume(self.local_index)

    async def embed(self, progress: Callable[[int, int], None] | None = None) -> bool:
        """Compute the local index's missing vectors (those of unchanged texts are reused); False when
        embedding failed (retrieval then stays lexical). progress hears (texts done, texts in all)."""
        return await self.embedding.run(self.local_index, progress)

    async def vectors_built(self) -> None:
        """Wait for the background embedding started by open(), if any."""
        await self.embedding.wait()

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
            "ocr": None if self.index.remote else self.index.ocr,
            "indexed_at": None if self.index.remote else self.index.updated_at,
            "watch": self.watch_status(),
            "providers": engine.providers,
            "thresholds": engine.config.thresholds.model_dump(),
            "research_rounds": engine.config.research_rounds,
            "cache": self.cache_status(),
            "vectors": self.vector_status(),
            "access": self.access_status(),
            "lexicon": lexicon_status(self.settings.lexicon_path),
        }

    def access_status(self) -> dict[str, object]:
        """For /api/health: whether answers are trimmed to the asker, and (local index) how many
        documents have no access rule."""
        out: dict[str, object] = {"trimming": self.settings.access_trimming}
        if self.settings.access_trimming:
            out["unknown"] = self.settings.access_unknown
        if not self.index.remote:
            out["documents_without_rule"] = len(self.index.unknown_files)
        return out

    def cache_status(self) -> dict[str, object]:
        cache = self.engine.cache if self.engine is not None else None
        if cache is None:
            return {"enabled": False}
        stats = cache.stats
        return {
            "enabled": True,
            "backend": cache.backend,
            "entries": cache.entries,
            "hits": stats.hits,
            "misses": stats.misses,
            "hit_rate": round(stats.hit_rate, 3),
        }

    def watch_status(self) -> dict[str, object]:
        out: dict[str, object] = {"enabled": self.watch.enabled, "rebuilds": self.watch.rebuilds}
        if self.watch.last_change:
            out["last_change"] = self.watch.last_change
        if self.watch.error:
            out["error"] = self.watch.error
        return out

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
        remote = (lambda: self._remote_version) if self.sharepoint is not None and index is None else None
        try:
            self.engine = build_engine(self.settings, index, remote)
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
        self.stop_watching.set()
        if self.watch_task is not None and not self.watch_task.done():
            # A rebuild in progress is not waited for: its thread finishes on its own, unused.
            self.watch_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.watch_task
        self.watch.enabled = False
        await self.embedding.stop()
        if self.sharepoint is not None:
            await self.sharepoint.close()
        retiring = list(self._retiring)
        for task in retiring:
            task.cancel()  # closes the replaced engines now
        await asyncio.gather(*retiring, return_exceptions=True)
        if self.engine is not None:
            await self.engine.close()


async def _close_later(engine: CragEngine, delay: float) -> None:
    try:
        await asyncio.sleep(delay)
    finally:
        await engine.close()


def _sharepoint_source(settings: CragSettings) -> SharePointSource:
    # Imported here: the Graph SDK is a large import that folder-only bots never need.
    from crag.ingest.sharepoint.schedule import SharePointSource

    return SharePointSource(settings)
