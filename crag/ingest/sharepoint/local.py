"""The local index as the target of a SharePoint library sync.

The library's files go through the same build as a folder's (crag/ingest/local_target.py): files
whose key is unchanged keep their chunks and terms, the others are chunked from what the sync read,
and the index folder is swapped in whole. The sync state (the delta link, the items seen) is stored in
the index's manifest, in the same swap: an index and the delta link it reflects never part.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from crag.config.engine_settings import CragSettings
from crag.ingest.local_target import (
    INDEX_FORMAT,
    BuildReport,
    Progress,
    build_from_documents,
    indexed_keys,
    update_manifest,
)
from crag.ingest.ocr.choice import ocr_engine
from crag.ingest.ocr.scans import OcrContext
from crag.ingest.sharepoint.library import Library
from crag.ingest.sharepoint.sync import Progress as SyncProgress
from crag.ingest.sharepoint.sync import SyncResult, sync_library
from crag.ingest.sharepoint.sync_state import LibraryState
from crag.providers.graph.client import GraphClient
from crag.retrieval.search.local_index import LocalIndex, read_manifest

STATE_KEY = "sharepoint"  # the manifest entry holding the LibraryState


def fingerprint(settings: CragSettings, files: dict[str, str]) -> dict[str, object]:
    """What the index is built from: the index-shaping settings and each file's key."""
    return {
        "format": INDEX_FORMAT,
        "max_chars": settings.chunk_max_chars,
        "max_tokens": settings.chunk_max_tokens,
        "base_url": "",  # citation links are the items' webUrl, not a base URL + path
        "source": "sharepoint",
        "files": files,
    }


def stored_state(index_dir: Path) -> LibraryState | None:
    """The sync state stored with the index (None: no index, or not a SharePoint one)."""
    try:
        return LibraryState.model_validate(read_manifest(index_dir)[STATE_KEY])
    except (OSError, ValueError, KeyError):
        return None


def load_stored(index_dir: Path) -> LocalIndex | None:
    """The stored SharePoint index, as the last sync left it (None: there is none yet)."""
    if stored_state(index_dir) is None:
        return None
    return LocalIndex.load(index_dir)


@dataclass
class LocalSync:
    result: SyncResult
    index: LocalIndex | None  # the new index; None when nothing changed (the stored one stands)
    build: BuildReport | None


async def sync_to_local(
    settings: CragSettings,
    client: GraphClient,
    *,
    full: bool = False,
    progress: SyncProgress | None = None,
    build_progress: Progress | None = None,
    before_build: Callable[[], Awaitable[None]] | None = None,
) -> LocalSync:
    """Sync the library of settings.sharepoint into the local index at settings.index_dir.
    before_build runs just before the index folder is rebuilt (the bot stops embedding into it)."""
    index_dir = settings.index_dir.expanduser()
    sp = settings.sharepoint
    library = Library(client, sp.site, sp.drive, sp.folder)
    previous = await asyncio.to_thread(stored_state, index_dir)
    indexed = await asyncio.to_thread(indexed_keys, index_dir, fingerprint(settings, {}))
    result = await sync_library(
        library,
        previous,
        indexed,
        site_groups=sp.site_groups,
        max_bytes=sp.max_bytes,
        full=full,
        progress=progress,
        ocr=OcrContext(ocr_engine(settings)),
    )
    new = fingerprint(settings, result.files)
    state = result.state.model_dump(mode="json")
    if previous is not None and not result.changed and await asyncio.to_thread(_built_from, index_dir, new):
        # Nothing to re-index: only the delta link moves on (the index version stays, and the cache).
        await asyncio.to_thread(update_manifest, index_dir, **{STATE_KEY: state})
        return LocalSync(result, None, None)
    if before_build is not None:
        await before_build()
    index, report = await asyncio.to_thread(
        build_from_documents,
        index_dir,
        new,
        result.documents,
        result.urls,
        result.skipped,
        settings.chunk_max_chars,
        settings.chunk_max_tokens,
        {STATE_KEY: state},
        build_progress,
    )
    return LocalSync(result, index, report)


def _built_from(index_dir: Path, fingerprint: dict[str, object]) -> bool:
    try:
        return bool(read_manifest(index_dir).get("fingerprint") == fingerprint)
    except (OSError, ValueError):
        return False
