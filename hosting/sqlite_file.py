"""One aiosqlite connection to a WAL-mode SQLite file: what the feedback and state stores share.

A file SQLite cannot read as a database (garbage bytes, a torn copy, a failed integrity check) does
not stop the bot: it is moved aside as `<name>.corrupt-<UTC time>`, an ERROR names it, the store
starts with an empty database, and `quarantined` lists what was moved (for the health endpoint).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import aiosqlite

log = logging.getLogger(__name__)

# SQLite's primary result codes for a damaged file: SQLITE_CORRUPT, SQLITE_NOTADB.
_CORRUPT_CODES = {11, 26}

Setup = Callable[[aiosqlite.Connection], Awaitable[None]]


class CorruptDatabase(sqlite3.DatabaseError):
    """The file opened, but SQLite's integrity check found damage."""


def is_corrupt(exc: BaseException) -> bool:
    if isinstance(exc, CorruptDatabase):
        return True
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, sqlite3.DatabaseError) and code is not None and code & 0xFF in _CORRUPT_CODES


def quarantine_name(path: Path) -> Path:
    """Where a damaged file is moved: next to it, named by the UTC time (unique to the microsecond)."""
    return path.with_name(f"{path.name}.corrupt-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S.%fZ')}")


async def open_connection(
    path: Path,
    busy_timeout_ms: int,
    isolation_level: str | None = "",
    readonly: bool = False,
    check: bool = False,
) -> aiosqlite.Connection:
    """A connection in WAL mode, its thread a daemon: a store left open by a failed start-up must not
    keep the process alive after the event loop ended. With `check`, SQLite's quick integrity check
    runs first (before anything is written to the file) and damage raises CorruptDatabase."""
    if readonly:
        db = aiosqlite.connect(f"file:{path}?mode=ro", uri=True, isolation_level=isolation_level)
    else:
        db = aiosqlite.connect(path, isolation_level=isolation_level)
    thread = getattr(db, "_thread", None)
    if thread is not None:
        thread.daemon = True
    await db
    try:
        await db.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        if check:
            async with db.execute("PRAGMA quick_check") as cur:
                problems = [str(row[0]) for row in await cur.fetchall()]
            if problems != ["ok"]:
                raise CorruptDatabase("; ".join(problems)[:300])
        if not readonly:
            # WAL: readers (exports, stats) never block writes, and a killed process keeps every commit.
            await db.execute("PRAGMA journal_mode=WAL")
    except BaseException:
        await db.close()
        raise
    return db


class SqliteFile:
    def __init__(self, path: Path, busy_timeout_ms: int = 500) -> None:
        self.path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._db: aiosqlite.Connection | None = None
        # Damaged files moved aside since this store was created (paths, oldest first).
        self.quarantined: list[str] = []

    async def connect(
        self, setup: Setup | None = None, isolation_level: str | None = ""
    ) -> aiosqlite.Connection:
        """Open the file, check it, and run `setup` (the schema); a damaged file is quarantined and
        replaced by an empty one. Other errors (a locked file, a full disk) are raised as they are."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = await self._open_checked(setup, isolation_level)
        except sqlite3.DatabaseError as exc:
            if not is_corrupt(exc):
                raise
            self.quarantine(exc)
            self._db = await self._open_checked(setup, isolation_level)
        return self._db

    async def _open_checked(self, setup: Setup | None, isolation_level: str | None) -> aiosqlite.Connection:
        db = await open_connection(self.path, self._busy_timeout_ms, isolation_level, check=True)
        try:
            if setup is not None:
                await setup(db)
        except BaseException:
            await db.close()
            raise
        return db

    def quarantine(self, reason: BaseException) -> None:
        """Move the damaged file (and its WAL and shared-memory files) aside."""
        target = quarantine_name(self.path)
        for suffix in ("", "-wal", "-shm"):
            source = self.path.with_name(self.path.name + suffix)
            if source.exists():
                source.rename(target.with_name(target.name + suffix))
        self.quarantined.append(str(target))
        log.error(
            "database %s is corrupt (%s): moved it to %s and started with an empty one",
            self.path,
            reason,
            target.name,
        )

    async def close(self) -> None:
        if self._db is not None:
            await self._db.close()
            self._db = None

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise RuntimeError(f"{self.path.name} is not open")
        return self._db
