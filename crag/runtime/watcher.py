"""Watching the documents folder (CRAG_WATCH_DOCS): each burst of changes re-indexes it through the
handle (only the changed files are read) and swaps the new index and engine in."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from watchfiles import Change

from crag.ingest.watch import watch_folder

if TYPE_CHECKING:
    from crag.runtime.handle import EngineHandle

log = logging.getLogger("crag.runtime.handle")
RETRY_S = 5.0  # a failed rebuild is tried again this long after


async def watch_documents(handle: EngineHandle) -> None:
    docs_dir = handle.settings.docs_dir.expanduser()
    log.info("watching %s: changed documents are re-indexed while serving", docs_dir)

    async def on_change(changes: set[tuple[Change, str]]) -> None:
        await handle.refresh()
        handle.watching.set()  # the first call comes once the watch is on (tests wait for it)
        if handle.failed:
            # Perhaps passing (a file half-copied, another instance writing the same index):
            # once more after a pause, rather than serving the old index until the next change.
            await asyncio.sleep(RETRY_S)
            await handle.refresh()

    try:
        # The access file too: a changed rule re-applies to every chunk within seconds.
        await watch_folder(docs_dir, on_change, handle.stop_watching, [handle.settings.access_path])
    except Exception as exc:  # the folder vanished, or the system refuses another watch
        handle.watch.enabled = False
        handle.watch.error = f"not watching: {exc.__class__.__name__}"
        log.warning("stopped watching %s (%s); documents are re-indexed on restart only", docs_dir, exc)
