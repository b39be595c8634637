"""The bot's side of a SharePoint source: open the index it serves, and sync it on a schedule.

`SharePointSource` is owned by the engine handle (crag/runtime/handle.py). The first open loads the index
the last sync stored (or runs the first sync when there is none); the handle then syncs every
CRAG_SHAREPOINT_SYNC_MINUTES in a background task and swaps each changed index in with a new engine
(and with it the answer cache, keyed by the index version), as the folder watcher does. A sync never
runs on a turn's path. A failed sync keeps the index serving and is tried at the next tick;
throttling (429) pushes the next try back by at least its Retry-After.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from crag.config.engine_settings import CragSettings
from crag.ingest.local_target import BuildReport
from crag.ingest.sharepoint.azure import read_state, state_file, sync_to_azure
from crag.ingest.sharepoint.local import LocalSync, load_stored, sync_to_local
from crag.ingest.sharepoint.sync_state import LibraryState, file_key
from crag.providers.graph.client import GraphClient, GraphError
from crag.retrieval.search.local_index import LocalIndex

log = logging.getLogger(__name__)


@dataclass
class SyncStatus:
    """For /api/health."""

    syncs: int = 0  # syncs completed since start
    last_sync: str = ""  # what the last sync found: "+1 ~0 -0 files (...) in 0.4s"
    error: str = ""  # why the last sync failed (the index kept serving)


class SharePointSource:
    def __init__(self, settings: CragSettings, **credential_options: object) -> None:
        self.settings = settings
        self.status = SyncStatus()
        self._credential_options = credential_options
        self._client: GraphClient | None = None

    def client(self) -> GraphClient:
        if self._client is None:
            self._client = GraphClient(self.settings.graph, **self._credential_options)
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def open_local(self) -> tuple[LocalIndex, BuildReport | None]:
        """The stored index (as the last sync left it), else the first sync's. Raises GraphError when
        there is none and the first sync fails."""
        index = await asyncio.to_thread(load_stored, self.settings.index_dir.expanduser())
        if index is not None:
            return index, None
        log.info(
            "SharePoint: first sync of %s into %s", self.settings.sharepoint.site, self.settings.index_dir
        )
        synced = await sync_to_local(self.settings, self.client())
        self._done(synced.result.report.summary())
        if synced.index is None:  # an index appeared meanwhile (another worker built it)
            return LocalIndex.load(self.settings.index_dir.expanduser()), None
        return synced.index, synced.build

    def remote_version(self) -> str:
        """The Azure index's content version as the stored sync state says (the answer cache key)."""
        config = self.settings.azure_search.config()
        state = read_state(state_file(self.settings, config))
        return state_version(state) if state is not None else ""

    async def sync_local(self, before_build: Callable[[], Awaitable[None]] | None = None) -> LocalSync:
        """One sync into the local index (a new index when the library changed)."""
        synced = await sync_to_local(self.settings, self.client(), before_build=before_build)
        self._done(synced.result.report.summary())
        return synced

    async def sync_remote(self) -> str:
        """One sync into Azure AI Search: the index's new version when it changed, else ""."""
        done = await sync_to_azure(self.settings, self.client())
        self._done(done.result.report.summary())
        return state_version(done.result.state) if done.result.changed else ""

    def failed(self, exc: Exception) -> float | None:
        """Note a failed sync; the Retry-After of a throttled one (seconds), else None."""
        self.status.error = f"sync failed: {exc if isinstance(exc, GraphError) else exc.__class__.__name__}"
        if isinstance(exc, GraphError) and exc.kind == "throttled":
            return exc.retry_after
        return None

    def _done(self, summary: str) -> None:
        self.status.syncs += 1
        self.status.last_sync = summary
        self.status.error = ""
        log.info("SharePoint synced: %s", summary)


def state_version(state: LibraryState) -> str:
    """A version of what the library's index holds: each file's key, by path."""
    keys = {path: file_key(state.items[item_id]) for path, item_id in state.files().items()}
    return hashlib.sha1(json.dumps(keys, sort_keys=True).encode()).hexdigest()[:12]
