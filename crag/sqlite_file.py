"""One aiosqlite connection to a WAL-mode SQLite file: what the feedback and state stores share."""

from __future__ import annotations

from pathlib import Path

import aiosqlite


class SqliteFile:
    def __init__(self, path: Path, busy_timeout_ms: int = 500) -> None:
        self.path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._db: aiosqlite.Connection | None = None

    async def connect(self) -> aiosqlite.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = await aiosqlite.connect(self.path)
        # WAL: readers (exports, stats) never block writes, and a killed process keeps every commit.
        await self._db.execute("PRAGMA journal_mode=WAL")
        await self._db.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_ms)}")
        return self._db

    async def close(self) -> None:
        if self._db is not None:
            await self._db.close()
            self._db = None

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise RuntimeError(f"{self.path.name} is not open")
        return self._db
