"""The engine and the index it answers from, opened once for an app: the one wiring point the bot,
its health endpoint and the Web Chat page use (`crag.factory` builds the pieces).

Opening reads (or builds) the local index off the event loop, builds the engine, and embeds the
index in the background: lexical answers at once, hybrid once every chunk has its vector.

With CRAG_WATCH_DOCS it then watches the documents folder: each burst of changes rebuilds the index
(only the changed files are read) and a new engine over it, swapped in whole. A turn reads
`handle.engine` once, so turns in flight finish on the old engine and new ones use the new; the new
engine's answer cache starts empty, so no answer from the old documents is served again.

With CRAG_SOURCE=sharepoint the documents come from a SharePoint library instead: the index the
last sync stored is opened (the first sync builds it), and a background task syncs the library
every CRAG_SHAREPOINT_SYNC_MINUTES, swapping each changed index in the same way
(crag/ingest/sharepoint/schedule.py). Synced into Azure AI Search, a change swaps in a new engine
whose answer cache is keyed by the synced content's version.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from watchfiles import Change

from crag.access_file import AccessFileError
from crag.engine import CragEngine
from crag.factory import (
    build_engine,
    local_index_stale,
    open_local_index,
    search_provider,
    uses_local_index,
)
from crag.graph.errors import GraphError
from crag.ingest.local_target import BuildReport, Progress
from crag.ingest.watch import watch_folder
from crag.search.local_index import LocalIndex
from crag.settings import CragSettings
from crag.text.bilingual import lexicon_status

if TYPE_CHECKING:
    from crag.ingest.sharepoint.schedule import SharePointSource

log = logging.getLogger(__name__)

# A replaced engine's connections are closed this long after the swap: turns that started on it
# finish first (a turn has no deadline of its own; model calls time out well within this).
RETIRE_GRACE_S = 300.0
RETRY_S = 5.0  # a failed rebuild is tried again this long after
REBUILD_FAILED = "re-indexing failed"

__all__ = ["EngineHandle", "IndexInfo", "uses_local_index"]


@dataclass
class IndexInfo:
    documents: int = 0
    chunks: int = 0
    skipped: list[str] = field(default_factory=list)
    remote: bool = False  # documents in a remote index (Azure AI Search): counts are not known here
    provider: str = "local"  # the search provider's name
    files: frozenset[str] = frozenset()  # relative paths the local index holds: what /docs/ may serve
    # Who may read each of those files (crag/access.py; None: unknown): /docs/ checks it when trimming.
    readers: dict[str, tuple[str, ...] | None] = field(default_factory=dict)
    updated_at: str = ""  # when this index was loaded or built (ISO 8601, UTC)
    ocr: dict[str, object] = field(default_factory=dict)  # scanned pages read and skipped (ocr_status)

    @property
    def unknown_files(self) -> list[str]:
        """Files of the local index no access rule covers."""
        return sorted(f for f, allowed in self.readers.items() if allowed is None)


@dataclass
class WatchInfo:
    """The documents watcher, for /api/health."""

    enabled: bool = False
    rebuilds: int = 0  # indexes swapped in since start
    last_change: str = ""  # what the last rebuild found: "+1 ~0 -0 files in 0.4s"
    error: str = ""  # why the last rebuild failed (the previous index kept serving), or why watching stopped


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
        self.watch = WatchInfo()
        self.watch_task: asyncio.Task[None] | None = None
        self._stop_watching = asyncio.Event()
        self.watching = asyncio.Event()  # set once the folder is watched and caught up
        self._refresh_lock = asyncio.Lock()  # one rebuild at a time, whoever asks
        self._retiring: set[asyncio.Task[None]] = set()  # replaced engines, closed after their grace
        self._embed_in_background = True
        self._version = ""  # the serving index's content version (embedding appends to index.version)
        self._failed = False  # the last rebuild failed: it is tried once more
        self.sharepoint: SharePointSource | None = None  # CRAG_SOURCE=sharepoint: the library synced
        self._remote_version = ""  # the Azure index's version as the last SharePoint sync left it

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
        if settings.source == "sharepoint":
            try:
                self.sharepoint = _sharepoint_source(settings)
            except Exception as exc:  # GraphError: settings the client refuses (safe to show)
                self.error = f"SharePoint: {exc}"
                log.error("cannot open the SharePoint source: %s", exc)
                return
        if not search.USES_LOCAL_INDEX:
            # Documents live in a remote index (Azure AI Search: `python -m crag.ingest --target azure`).
            if self.sharepoint is not None:
                with contextlib.suppress(ValueError):  # bad search settings: the engine says so below
                    self._remote_version = self.sharepoint.remote_version()
            if not self._build_engine(None):
                return
            self.index = IndexInfo(remote=True, provider=search_name)
            log.info("engine ready on the %s search provider", search_name)
            self._ready.set()
            self._start_sync(remote=True)
            return

        def log_progress(name: str, done: int, total: int) -> None:
            if total and (done == total or done % max(1, total // 10) == 0):
                log.info("indexing documents: %d/%d %s", done, total, name)

        try:
            if self.sharepoint is not None:
                index, report = await self.sharepoint.open_local()
            else:
                index, report = await asyncio.to_thread(
                    open_local_index, settings, self.docs_url, progress or log_progress
                )
        except GraphError as exc:  # the first sync of a library failed: say why, as it is safe to
            self.error = f"SharePoint: {exc}"
            log.error("could not sync the SharePoint library: %s", exc)
            return
        except AccessFileError as exc:
            # The folder's permissions cannot be read: no index without them (never "allow all").
            self.error = str(exc)
            log.error("cannot start the engine: %s", exc)
            return
        except Exception as exc:
            self.error = f"index unavailable: {exc.__class__.__name__}"
            log.exception("could not open the local index from %s", settings.docs_dir)
            return
        self.index = _index_info(index)
        if not self._build_engine(index):
            return
        self.local_index = index
        self._version = index.version
        self.report = report
        self._embed_in_background = embed_in_background
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
            self.watch_task = asyncio.create_task(self._watch())
        self._start_sync(remote=False)

    def _start_sync(self, remote: bool) -> None:
        """Sync the SharePoint library in the background every CRAG_SHAREPOINT_SYNC_MINUTES."""
        if self.sharepoint is None or self.settings.sharepoint.sync_minutes <= 0:
            return
        self.watch = WatchInfo(enabled=True)
        self.watch_task = asyncio.create_task(self._sync_loop(remote))

    async def _sync_loop(self, remote: bool) -> None:
        interval = self.settings.sharepoint.sync_minutes * 60
        wait = interval
        while True:
            try:
                await asyncio.wait_for(self._stop_watching.wait(), wait)
                return
            except TimeoutError:
                pass
            retry_after = await self.sync_sharepoint(remote)
            # A throttled sync waits at least as long as Graph asked before the next.
            wait = max(interval, retry_after or 0.0)

    async def sync_sharepoint(self, remote: bool = False) -> float | None:
        """Sync the SharePoint library once and swap a changed index in (the scheduled task calls
        this; so may a test). Returns the Retry-After of a throttled sync. A failure keeps the
        current index serving and is logged."""
        source = self.sharepoint
        if source is None or self.engine is None:
            return None
        async with self._refresh_lock:
            started = time.perf_counter()
            try:
                if remote:
                    version = await source.sync_remote()
                    if version:
                        self._remote_version = version
                        self._swap_remote(build_engine(self.settings, None, lambda: self._remote_version))
                else:
                    synced = await source.sync_local(before_build=self._stop_embedding)
                    if synced.index is not None:
                        self._swap(build_engine(self.settings, synced.index), synced.index, synced.build)
            except Exception as exc:
                retry_after = source.failed(exc)
                self.watch.error = source.status.error
                log.warning(
                    "SharePoint sync failed after %.1fs (%s); still serving the previous index",
                    time.perf_counter() - started,
                    source.status.error,
                )
                self._resume_embedding()
                return retry_after
            self.watch.last_change = source.status.last_sync
            self.watch.error = ""
            return None

    def _swap_remote(self, engine: CragEngine) -> None:
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

    async def _watch(self) -> None:
        docs_dir = self.settings.docs_dir.expanduser()
        log.info("watching %s: changed documents are re-indexed while serving", docs_dir)

        async def on_change(changes: set[tuple[Change, str]]) -> None:
            await self.refresh()
            self.watching.set()  # the first call comes once the watch is on (tests wait for it)
            if self._failed:
                # Perhaps passing (a file half-copied, another instance writing the same index):
                # once more after a pause, rather than serving the old index until the next change.
                await asyncio.sleep(RETRY_S)
                await self.refresh()

        try:
            # The access file too: a changed rule re-applies to every chunk within seconds.
            await watch_folder(docs_dir, on_change, self._stop_watching, [self.settings.access_path])
        except Exception as exc:  # the folder vanished, or the system refuses another watch
            self.watch.enabled = False
            self.watch.error = f"not watching: {exc.__class__.__name__}"
            log.warning("stopped watching %s (%s); documents are re-indexed on restart only", docs_dir, exc)

    async def refresh(self) -> bool:
        """Re-index the documents folder if it changed and swap the new index and engine in (True).
        False when nothing changed or the rebuild failed: the current index keeps serving."""
        if self.local_index is None or self.engine is None:
            return False
        async with self._refresh_lock:
            started = time.perf_counter()
            self._failed = False
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
                await self._stop_embedding()
                # Loaded as stored when another process serving the folder has just built it.
                index, report = await asyncio.to_thread(
                    open_local_index, self.settings, self.docs_url, None, fingerprint
                )
                engine = build_engine(self.settings, index)
            except Exception as exc:
                self._failed = True
                # An access file's message says what to fix (file, rule, value) and holds no secret.
                reason = str(exc) if isinstance(exc, AccessFileError) else exc.__class__.__name__
                self.watch.error = f"{REBUILD_FAILED}: {reason}"
                log.warning(
                    "re-indexing %s failed (%s: %s); still serving the previous index",
                    self.settings.docs_dir,
                    exc.__class__.__name__,
                    exc,
                )
                self._resume_embedding()
                return False
            old = self.local_index
            self._swap(engine, index, report)
            seconds = time.perf_counter() - started
            added, changed, removed = _changes(old.hashes, index.hashes)
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

    def _swap(self, engine: CragEngine, index: LocalIndex, report: BuildReport | None) -> None:
        """The new index and engine replace the old in one step (no await in between)."""
        old = self.engine
        if old is not None and old.cache is not None and engine.cache is not None:
            engine.cache.stats = old.cache.stats  # the counts on /api/health span the process's life
        self.engine = engine
        self.local_index = index
        self._version = index.version
        self.report = report
        self.index = _index_info(index)
        self.watch.rebuilds += 1
        self.watch.error = ""
        if old is not None:
            task = asyncio.create_task(_close_later(old, RETIRE_GRACE_S))
            self._retiring.add(task)
            task.add_done_callback(self._retiring.discard)
        self._resume_embedding()

    async def _stop_embedding(self) -> None:
        task, self.vector_task = self.vector_task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _resume_embedding(self) -> None:
        """Compute the current index's missing vectors in the background (again), as at start."""
        index = self.local_index
        if index is None or index.vectors is None or index.vectors.ready or not self._embed_in_background:
            return
        if self.vector_task is None or self.vector_task.done():
            self.vector_task = asyncio.create_task(self.embed())

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
            "index vectors ready (%s): %d texts, %d embedded now, %.1fs; hybrid retrieval on, and"
            " answers from the documents alone (before: 'check the sources', CRAG_WORDS_ONLY_ANSWERS)",
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
            "ocr": None if self.index.remote else self.index.ocr,
            "indexed_at": None if self.index.remote else self.index.updated_at,
            "watch": self.watch_status(),
            "providers": engine.providers,
            "thresholds": {"upper": engine.config.upper, "lower": engine.config.lower},
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
        self._stop_watching.set()
        if self.watch_task is not None and not self.watch_task.done():
            # A rebuild in progress is not waited for: its thread finishes on its own, unused.
            self.watch_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.watch_task
        self.watch.enabled = False
        await self._stop_embedding()
        if self.sharepoint is not None:
            await self.sharepoint.close()
        retiring = list(self._retiring)
        for task in retiring:
            task.cancel()  # closes the replaced engines now
        await asyncio.gather(*retiring, return_exceptions=True)
        if self.engine is not None:
            await self.engine.close()


def _index_info(index: LocalIndex) -> IndexInfo:
    readers = {chunk.file: chunk.allowed for chunk in index.chunks}
    return IndexInfo(
        documents=index.documents,
        chunks=index.size,
        skipped=list(index.skipped),
        files=frozenset(readers),
        readers=readers,
        updated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        ocr=ocr_status(index),
    )


def ocr_status(index: LocalIndex) -> dict[str, object]:
    """For /api/health: the OCR engine, the scanned pages the index holds and those it could not read,
    with the reason the first such file gave (how to install Tesseract, the service's error)."""
    scans = index.scans.values()
    status: dict[str, object] = {
        "engine": index.ocr_engine,
        "pages_read": sum(int(s.get("read", 0)) for s in scans),
        "pages_skipped": sum(int(s.get("scanned", 0)) - int(s.get("read", 0)) for s in scans),
    }
    reasons = [str(s.get("reason")) for s in scans if s.get("reason") and s.get("read") != s.get("scanned")]
    if reasons:
        status["notice"] = reasons[0]
    return status


def _changes(before: dict[str, str], after: dict[str, str]) -> tuple[list[str], list[str], list[str]]:
    """(added, changed, removed) files between two indexes' file -> content hash maps."""
    added = sorted(after.keys() - before.keys())
    changed = sorted(f for f in after.keys() & before.keys() if after[f] != before[f])
    return added, changed, sorted(before.keys() - after.keys())


async def _close_later(engine: CragEngine, delay: float) -> None:
    try:
        await asyncio.sleep(delay)
    finally:
        await engine.close()


def _sharepoint_source(settings: CragSettings) -> SharePointSource:
    # Imported here: the Graph SDK is a large import that folder-only bots never need.
    from crag.ingest.sharepoint.schedule import SharePointSource

    return SharePointSource(settings)
