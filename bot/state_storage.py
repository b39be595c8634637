"""Where conversation state (history, dialog stack) lives: SQLite by default, so a restart loses
nothing; Azure Blob or Cosmos DB (botbuilder-azure) when several instances serve one bot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonpickle
from botbuilder.core import MemoryStorage, Storage

from config import BotSettings
from crag.sqlite_file import SqliteFile

_SCHEMA = """
CREATE TABLE IF NOT EXISTS bot_state (
    key TEXT PRIMARY KEY,
    etag INTEGER NOT NULL,
    value TEXT NOT NULL,
    updated_at TEXT NOT NULL DEFAULT (datetime('now'))
)
"""


class SqliteStorage(SqliteFile, Storage):
    """botbuilder's Storage over one SQLite table. Values are stored as jsonpickle, like the SDK's
    Blob storage does, so dialog state objects round-trip; e_tag gives optimistic concurrency."""

    def __init__(self, path: Path) -> None:
        SqliteFile.__init__(self, path, busy_timeout_ms=5000)

    async def open(self) -> None:
        db = await self.connect()
        await db.execute(_SCHEMA)
        await db.commit()

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
        await self.db.commit()

    async def delete(self, keys: list[str]) -> None:
        if keys:
            marks = ",".join("?" * len(keys))
            await self.db.execute(f"DELETE FROM bot_state WHERE key IN ({marks})", keys)
            await self.db.commit()


def make_storage(settings: BotSettings) -> Storage:
    kind = settings.state_storage
    if kind == "memory":
        return MemoryStorage()
    if kind == "sqlite":
        return SqliteStorage(settings.state_db)
    try:  # botbuilder-azure is optional: only multi-instance deployments need it
        from botbuilder.azure import (
            BlobStorage,
            BlobStorageSettings,
            CosmosDbPartitionedConfig,
            CosmosDbPartitionedStorage,
        )
    except ImportError as exc:
        raise ValueError(
            f"STATE_STORAGE={kind} needs the botbuilder-azure package: pip install botbuilder-azure==4.17.1"
        ) from exc
    if kind == "blob":
        if not settings.azure_storage_connection_string.get_secret_value():
            raise ValueError("STATE_STORAGE=blob needs AZURE_STORAGE_CONNECTION_STRING")
        return BlobStorage(
            BlobStorageSettings(
                container_name=settings.azure_storage_container,
                connection_string=settings.azure_storage_connection_string.get_secret_value(),
            )
        )
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
