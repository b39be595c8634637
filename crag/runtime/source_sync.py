"""Keeping a SharePoint library in sync while serving (CRAG_SOURCE=sharepoint): a background task syncs
it every CRAG_SHAREPOINT_SYNC_MINUTES through the handle's SharePointSource
(crag/ingest/sharepoint/schedule.py) and swaps each changed index in. Synced into Azure AI Search, a
change swaps in a new engine whose answer cache is keyed by the synced content's version."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from crag.runtime.factory import build_engine

if TYPE_CHECKING:
    from crag.ingest.sharepoint.schedule import SharePointSource
    from crag.runtime.handle import EngineHandle

log = logging.getLogger("crag.runtime.handle")


async def sync_loop(handle: EngineHandle, remote: bool) -> None:
    """Sync every CRAG_SHAREPOINT_SYNC_MINUTES until the handle stops watching."""
    interval = handle.settings.sharepoint.sync_minutes * 60
    wait = interval
    while True:
        try:
            await asyncio.wait_for(handle.stop_watching.wait(), wait)
            return
        except TimeoutError:
            pass
        retry_after = await sync_once(handle, remote)
        # A throttled sync waits at least as long as Graph asked before the next.
        wait = max(interval, retry_after or 0.0)


async def sync_once(handle: EngineHandle, remote: bool) -> float | None:
    """Sync the library once and swap a changed index in. Returns the Retry-After of a throttled sync.
    A failure keeps the current index serving and is logged."""
    source: SharePointSource | None = handle.sharepoint
    if source is None or handle.engine is None:
        return None
    async with handle.refresh_lock:
        started = time.perf_counter()
        try:
            if remote:
                version = await source.sync_remote()
                if version:
                    handle._remote_version = version
                    handle.swap_remote(build_engine(handle.settings, None, lambda: handle._remote_version))
            else:
                synced = await source.sync_local(before_build=handle.embedding.stop)
                if synced.index is not None:
                    handle.swap(build_engine(handle.settings, synced.index), synced.index, synced.build)
        except Exception as exc:
            retry_after = source.failed(exc)
            handle.watch.error = source.status.error
            log.warning(
                "SharePoint sync failed after %.1fs (%s); still serving the previous index",
                time.perf_counter() - started,
                source.status.error,
            )
            handle.embedding.resume(handle.local_index)
            return retry_after
        handle.watch.last_change = source.status.last_sync
        handle.watch.error = ""
        return None
