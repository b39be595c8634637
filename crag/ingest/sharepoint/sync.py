"""One incremental sync of a SharePoint library: what the index must hold now, and what to read again.

1. Find the site, library and folder (settings may have changed: another library starts afresh).
2. Read the delta feed from the stored delta link (all items without one, or when it expired) and
   apply it to the stored items by id; deleted items leave, moved ones follow their parent.
3. Files whose path changed without appearing in the feed (their folder was renamed or moved) are
   read again for their new webUrl.
4. Permissions are read for every file the feed named, every file under a folder whose sharing
   changed, every moved file, and every file whose readers are not known yet.
5. Each file's key (content version, link, readers) is compared with what the index holds: only the
   files whose key differs are downloaded and converted with the loaders (crag/ingest/loaders.py).

Nothing is written here: the target (local.py, azure.py) stores the index and the new state together,
so a sync that fails half-way leaves the previous delta link, and the next one does the work again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from msgraph.generated.models.drive_item import DriveItem

from crag.ingest.loaders import Document, DocumentError, from_bytes
from crag.ingest.ocr.scans import OcrContext
from crag.ingest.sharepoint.library import Library, is_shared_changed
from crag.ingest.sharepoint.permissions import access_from
from crag.ingest.sharepoint.sync_state import Entry, LibraryState, Location, file_key, mapping_version
from crag.providers.graph.client import GraphError

log = logging.getLogger(__name__)

Progress = Callable[[str, int, int], None]  # (stage, done, total); total 0 while unknown
CONCURRENCY = 4  # Graph requests in flight at once (downloads, permissions)


@dataclass
class SyncReport:
    full: bool = False  # the whole library was enumerated (first sync, expired link, --full)
    changes: int = 0  # items the delta feed reported
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    downloaded: int = 0
    permissions_read: int = 0
    unmapped: dict[str, int] = field(default_factory=dict)  # unmapped grant -> files it is on
    seconds: float = 0.0

    def summary(self) -> str:
        return (
            f"+{len(self.added)} ~{len(self.changed)} -{len(self.removed)} files "
            f"({self.changes} changes read, {self.downloaded} downloaded, "
            f"{self.permissions_read} permission lists read{', full enumeration' if self.full else ''}) "
            f"in {self.seconds:.1f}s"
        )


@dataclass
class SyncResult:
    state: LibraryState
    files: dict[str, str]  # path -> key: every file the index must hold
    documents: dict[str, Document]  # path -> document: the files to (re)index
    urls: dict[str, str]  # path -> citation link (webUrl), for the documents
    skipped: list[str]  # why files could not be indexed, one line each
    report: SyncReport

    @property
    def changed(self) -> bool:
        """Whether the index must change (files added, changed or removed)."""
        return bool(self.report.added or self.report.changed or self.report.removed)


async def sync_library(
    library: Library,
    previous: LibraryState | None,
    indexed: Mapping[str, str],
    *,
    site_groups: Mapping[str, Sequence[str]] | None = None,
    max_bytes: int = 50 * 1024 * 1024,
    full: bool = False,
    progress: Progress | None = None,
    stored: Callable[[str], str] = str,
    ocr: OcrContext | None = None,
) -> SyncResult:
    """Sync from `previous` (None: the first time); `indexed` is path -> what the index stores for
    the file, which is stored(key) (an index may fold its own settings into the key).
    Raises GraphError when Graph fails (nothing is half-applied: the caller keeps its state)."""
    started = time.perf_counter()
    location = await library.locate()
    fresh = full or previous is None or not _same_place(previous.location, location)
    if fresh or previous is None:
        state = LibraryState(location=location)
    else:
        state = previous.model_copy(deep=True, update={"location": location})
    mapping = mapping_version(site_groups or {})
    report = SyncReport(full=fresh)
    old_paths = {item_id: path for path, item_id in state.files().items()}
    touched: set[str] = set()
    shared: set[str] = set()
    try:
        await _read_delta(library, state, touched, shared, report, progress)
    except GraphError as exc:
        if exc.kind != "gone":
            raise
        log.warning("SharePoint: %s; enumerating the whole library again", exc)
        state = LibraryState(location=location, mapping=mapping)
        touched.clear()
        shared.clear()
        report = SyncReport(full=True)
        await _read_delta(library, state, touched, shared, report, progress)
    _prune(state)
    files = state.files()
    moved = [
        item_id for path, item_id in files.items() if item_id in old_paths and old_paths[item_id] != path
    ]
    await _refresh(library, state, [i for i in moved if i not in touched])
    files = state.files()  # a refreshed item may be gone
    in_files = set(files.values())
    need = touched | set(moved) | {i for f in shared for i in state.below(f)}
    if state.mapping != mapping:  # CRAG_SHAREPOINT_SITE_GROUPS changed: every file's readers may have
        need |= in_files
        state.mapping = mapping
    need |= {i for i in in_files if state.items[i].allowed is None}
    await _read_permissions(library, state, sorted(need & in_files), site_groups or {}, report, progress)
    keys = {path: file_key(state.items[item_id]) for path, item_id in files.items()}
    documents, urls = await _read_files(
        library,
        state,
        files,
        {p: stored(k) for p, k in keys.items()},
        indexed,
        max_bytes,
        report,
        progress,
        ocr,
    )
    skipped = []
    for path, item_id in sorted(files.items()):
        entry = state.items[item_id]
        if entry.skipped and entry.skipped_key == skip_key(stored(keys[path]), ocr):
            skipped.append(f"{path}: {entry.skipped}")
    report.added = sorted(keys.keys() - indexed.keys())
    report.removed = sorted(indexed.keys() - keys.keys())
    report.changed = sorted(p for p in keys.keys() & indexed.keys() if stored(keys[p]) != indexed[p])
    for item_id in in_files:
        for grant in state.items[item_id].unmapped:
            report.unmapped[grant] = report.unmapped.get(grant, 0) + 1
    report.seconds = time.perf_counter() - started
    return SyncResult(state, keys, documents, urls, skipped, report)


def _same_place(old: Location, new: Location) -> bool:
    return (old.drive_id, old.root_id, old.folder_id) == (new.drive_id, new.root_id, new.folder_id)


async def _read_delta(
    library: Library,
    state: LibraryState,
    touched: set[str],
    shared: set[str],
    report: SyncReport,
    progress: Progress | None,
) -> None:
    async for page in library.delta(state.location, state.delta_link):
        for item in page.items:
            _apply(state, item, touched, shared)
        report.changes += len(page.items)
        if progress:
            progress("changes", report.changes, 0)
        if page.delta_link:
            state.delta_link = page.delta_link


def _apply(state: LibraryState, item: DriveItem, touched: set[str], shared: set[str]) -> None:
    """One item of the feed; the last occurrence of an item wins (Graph may list one twice)."""
    item_id = item.id
    if not item_id:
        return
    if item.deleted is not None:
        state.items.pop(item_id, None)
        touched.discard(item_id)
        return
    if item.root is not None or item_id == state.location.root_id:
        return
    old = state.items.get(item_id)
    parent = item.parent_reference.id if item.parent_reference is not None else None
    is_folder = item.folder is not None or item.package is not None
    entry = Entry(
        name=item.name or (old.name if old else ""),
        parent=parent or (old.parent if old else ""),
        folder=is_folder,
        version=_version(item) or (old.version if old else ""),
        url=item.web_url or (old.url if old else ""),
        size=item.size if item.size is not None else (old.size if old else 0),
    )
    if old is not None:  # what only a later step re-reads
        entry.allowed, entry.unmapped = old.allowed, old.unmapped
        entry.skipped, entry.skipped_key = old.skipped, old.skipped_key
    state.items[item_id] = entry
    if is_folder:
        if is_shared_changed(item):
            shared.add(item_id)
    else:
        touched.add(item_id)


def _version(item: DriveItem) -> str:
    """The content's version: a hash of the bytes where Graph gives one (quickXorHash in SharePoint
    and OneDrive for Business), else the eTag (which also changes on a rename: one download more)."""
    hashes = item.file.hashes if item.file is not None else None
    if hashes is not None:
        for value in (hashes.quick_xor_hash, hashes.sha256_hash, hashes.sha1_hash):
            if value:
                return value
    return item.c_tag or item.e_tag or ""


def _prune(state: LibraryState) -> None:
    """Forget items whose parent chain no longer reaches the root (under a deleted folder)."""
    orphans = [i for i in state.items if state.path(i) is None]
    for item_id in orphans:
        del state.items[item_id]


async def _refresh(library: Library, state: LibraryState, ids: list[str]) -> None:
    """Read files again whose folder moved: their webUrl changed, the feed did not say so."""

    async def one(item_id: str) -> None:
        item = await library.item(state.location, item_id)
        entry = state.items[item_id]
        if item is None:
            del state.items[item_id]
            return
        entry.url = item.web_url or entry.url
        entry.version = _version(item) or entry.version

    await _bounded(ids, one)


async def _read_permissions(
    library: Library,
    state: LibraryState,
    ids: list[str],
    site_groups: Mapping[str, Sequence[str]],
    report: SyncReport,
    progress: Progress | None,
) -> None:
    done = [0]

    async def one(item_id: str) -> None:
        entry = state.items[item_id]
        try:
            access = access_from(await library.permissions(state.location, item_id), site_groups)
        except GraphError as exc:
            if exc.kind not in ("forbidden", "not_found"):
                raise
            # Unknown, not "nobody": trimming treats unknown readers as its setting says (deny).
            log.warning("SharePoint: permissions of %s unreadable (%s)", entry.name, exc)
            entry.allowed, entry.unmapped = None, ("permissions unreadable",)
        else:
            entry.allowed, entry.unmapped = access.allowed, access.unmapped
        report.permissions_read += 1
        done[0] += 1
        if progress:
            progress("permissions", done[0], len(ids))

    await _bounded(ids, one)


async def _read_files(
    library: Library,
    state: LibraryState,
    files: Mapping[str, str],
    keys: Mapping[str, str],
    indexed: Mapping[str, str],
    max_bytes: int,
    report: SyncReport,
    progress: Progress | None,
    ocr: OcrContext | None = None,
) -> tuple[dict[str, Document], dict[str, str]]:
    todo = [
        path
        for path, item_id in sorted(files.items())
        if indexed.get(path) != keys[path] and state.items[item_id].skipped_key != skip_key(keys[path], ocr)
    ]
    documents: dict[str, Document] = {}
    urls: dict[str, str] = {}
    done = [0]

    async def one(path: str) -> None:
        entry = state.items[files[path]]
        entry.skipped = entry.skipped_key = ""
        try:
            if entry.size > max_bytes:
                raise DocumentError(f"{path}: larger than {max_bytes // (1024 * 1024)} MB, not downloaded")
            raw = await library.content(state.location, files[path])
            report.downloaded += 1
            # Scanned pages and images are read with the folder's OCR engine (none: skipped, named).
            doc = await asyncio.to_thread(from_bytes, raw, path, ocr)
        except DocumentError as exc:
            entry.skipped, entry.skipped_key = str(exc).removeprefix(f"{path}: "), skip_key(keys[path], ocr)
        except GraphError as exc:
            if exc.kind != "not_found":
                raise
            log.info("SharePoint: %s vanished while being read; the next sync sees it go", path)
        else:
            documents[path] = dataclasses.replace(doc, allowed=entry.allowed)
            urls[path] = entry.url
        done[0] += 1
        if progress:
            progress("downloads", done[0], len(todo))

    await _bounded(todo, one)
    return documents, urls


def skip_key(key: str, ocr: OcrContext | None) -> str:
    """What a file left unread is remembered by: its version, and the OCR engine of that sync. A skipped
    file is downloaded again when it changes, or when the OCR engine does: a scan skipped for want of
    Tesseract is read once Tesseract is installed, without waiting for someone to edit it."""
    engine = ocr.engine.name if ocr is not None and ocr.engine is not None else "none"
    return f"{key}|ocr={engine}"


async def _bounded(values: Sequence[str], work: Callable[[str], object]) -> None:
    """Run work(value) for each value, CONCURRENCY at a time; the first failure cancels the rest."""
    if not values:
        return
    queue = iter(values)

    async def worker() -> None:
        for value in queue:
            await work(value)  # type: ignore[misc]

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(min(CONCURRENCY, len(values))):
                group.create_task(worker())
    except BaseExceptionGroup as failed:
        raise failed.exceptions[0] from None  # callers handle GraphError, not a group of them
