"""Where conversation state (history, dialog stack) lives. botbuilder 4.17 has no Storage that keeps
it on one machine across a restart (MemoryStorage forgets every conversation; the others need Azure),
so SQLite is the default here: tests/bot/test_teams.py::test_state_survives_a_restart. Azure Blob or
Cosmos DB (botbuilder-azure) when several instances serve one bot.

SQLite state untouched for CRAG_STATE_TTL_DAYS is deleted at start and then hourly, so the file
does not grow with every conversation ever held; a damaged file is quarantined (see SqliteFile)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Any

import aiosqlite
import jsonpickle
from botbuilder.core import MemoryStorage, Storage

from hosting.app_settings import BotSettings
from hosting.sqlite_file import SqliteFile

_SCHEMA = """
CREATE TABLE IF NOT EXISTS bot_state (
    key TEXT PRIMARY KEY,
    etag INTEGER NOT NULL,
    value TEXT NOT NULL,
    updated_at TEXT NOT NULL DEFAULT (datetime('now'))
);
CREATE INDEX IF NOT EXISTS bot_state_updated_at ON bot_state (updated_at);
"""

log = logging.getLogger(__name__)


class SqliteStorage(SqliteFile, Storage):  # type: ignore[misc]  # botbuilder has no type information (Any)
    """botbuilder's Storage over one SQLite table. Values are stored as jsonpickle, like the SDK's
    Blob storage does, so dialog state objects round-trip; e_tag gives optimistic concurrency."""

    def __init__(self, path: Path, ttl_days: float = 30.0, sweep_interval: float = 3600.0) -> None:
        SqliteFile.__init__(self, path, busy_timeout_ms=5000)
        self.ttl_days = ttl_days
        self.sweep_interval = sweep_interval
        self._sweeper: asyncio.Task[None] | None = None
        # One transaction at a time on the shared connection: a failed write rolls back only itself.
        self._write_lock = asyncio.Lock()

    async def open(self) -> None:
        await self.connect(self._create_schema)
        try:
            await self.sweep()
        except BaseException:
            await self.close()
            raise
        self._sweeper = asyncio.create_task(self._sweep_periodically(), name="state-sweeper")

    @staticmethod
    async def _create_schema(db: aiosqlite.Connection) -> None:
        await db.executescript(_SCHEMA)
        await db.commit()

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        await super().close()

    async def sweep(self) -> int:
        """Delete the state of conversations (and users) untouched for ttl_days; returns rows deleted."""
        async with self._write_lock:
            try:
                cur = await self.db.execute(
                    "DELETE FROM bot_state WHERE updated_at < datetime('now', ?)",
                    (f"-{self.ttl_days * 86400:.0f} seconds",),
                )
                await self.db.commit()
            except BaseException:
                with contextlib.suppress(Exception):
                    await self.db.rollback()
                raise
        deleted = cur.rowcount
        if deleted:
            log.info("expired the state of %d conversations/users older than %g days", deleted, self.ttl_days)
        return deleted

    async def _sweep_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_interval)
            try:
                await self.sweep()
            except Exception:  # a locked or failing database is tried again at the next sweep
                log.exception("could not sweep expired conversation state")

    async def read(self, keys: list[str]) -> dict[str, Any]:
        if not keys:
            return {}
        marks = ",".join("?" * len(keys))
        async with self.db.execute(
            f"SELECT key, etag, value FROM bot_state WHERE key IN ({marks})", keys
        ) as cur:
            rows = await cur.fetchall()
        out: dict[str, Any] = {}
        for key, etag, value in rows:
            item = jsonpickle.decode(value)
            if isinstance(item, dict):
                item["e_tag"] = str(etag)
            out[key] = item
        return out

    async def write(self, changes: dict[str, Any]) -> None:
        if not changes:
            return
        async with self._write_lock:
            try:
                await self._write(changes)
                await self.db.commit()
            except BaseException:
                with contextlib.suppress(Exception):
                    await self.db.rollback()
                raise

    async def _write(self, changes: dict[str, Any]) -> None:
        for key, value in changes.items():
            wanted = value.get("e_tag") if isinstance(value, dict) else getattr(value, "e_tag", None)
            async with self.db.execute("SELECT etag FROM bot_state WHERE key = ?", (key,)) as cur:
                row = await cur.fetchone()
            if row is not None and wanted not in (None, "*") and str(row[0]) != str(wanted):
                raise KeyError(f"etag conflict for {key}: state changed since it was read")
            stored = dict(value) if isinstance(value, dict) else value
            if isinstance(stored, dict):
                stored.pop("e_tag", None)
            etag = (row[0] + 1) if row is not None else 1
            await self.db.execute(
                "INSERT INTO bot_state (key, etag, value) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE"
                " SET etag = excluded.etag, value = excluded.value, updated_at = datetime('now')",
                (key, etag, jsonpickle.encode(stored)),
            )

    async def delete(self, keys: list[str]) -> None:
        if keys:
            marks = ",".join("?" * len(keys))
            async with self._write_lock:
                try:
                    await self.db.execute(f"DELETE FROM bot_state WHERE key IN ({marks})", keys)
                    await self.db.commit()
                except BaseException:
                    with contextlib.suppress(Exception):
                        await self.db.rollback()
                    raise


def quarantined_files(storage: Storage) -> list[str]:
    """Damaged state files moved aside on this start: SQLite's (the other storages have no file)."""
    return list(storage.quarantined) if isinstance(storage, SqliteStorage) else []


def make_storage(settings: BotSettings) -> Storage:
    kind = settings.state_storage
    if kind == "memory":
        return MemoryStorage()
    if kind == "sqlite":
        return SqliteStorage(settings.state_db, ttl_days=settings.state_ttl_days)
    try:  # botbuilder-azure: only multi-instance deployments need it
        from botbuilder.azure import (
            CosmosDbPartitionedConfig,
            CosmosDbPartitionedStorage,
        )

        from bot.state.blob_state import BlobStateStorage
    except ImportError as exc:
        raise ValueError(
            f"STATE_STORAGE={kind} needs botbuilder-azure and six (requirements.txt): {exc}"
        ) from exc
    if kind == "blob":
        account = settings.storage_account()
        if account is None:
            raise ValueError(
                "STATE_STORAGE=blob needs AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_ACCOUNT_URL"
            )
        # The SDK's BlobStorage with its defects worked around (bot/state/blob_state.py).
        return BlobStateStorage(account, settings.azure_storage_container)
    if not settings.cosmos_endpoint or not settings.cosmos_key.get_secret_value():
        raise ValueError("STATE_STORAGE=cosmos needs COSMOS_ENDPOINT and COSMOS_KEY")
    return CosmosDbPartitionedStorage(
        CosmosDbPartitionedConfig(
            cosmos_db_endpoint=settings.cosmos_endpoint,
            auth_key=settings.cosmos_key.get_secret_value(),
            database_id=settings.cosmos_database,
            container_id=settings.cosmos_container,
        )
    )
