"""Conversation state in SQLite expires: rows untouched for CRAG_STATE_TTL_DAYS are deleted when the
storage opens and then periodically in the background, so the file does not grow without bound."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from bot.state.storage import SqliteStorage, make_storage
from hosting.app_settings import BotSettings


def _backdate(db: Path, keys: list[str], days: float) -> None:
    with sqlite3.connect(db) as conn:
        conn.executemany(
            "UPDATE bot_state SET updated_at = datetime('now', ?) WHERE key = ?",
            [(f"-{days * 86400:.0f} seconds", k) for k in keys],
        )


async def test_state_older_than_the_ttl_is_swept_on_open(tmp_path: Path) -> None:
    db = tmp_path / "state.sqlite3"
    storage = SqliteStorage(db, ttl_days=30)
    await storage.open()
    await storage.write({f"conv/{i}": {"turns": [i]} for i in range(3000)})
    await storage.write({"fresh/1": {"turns": ["kept"]}, "recent/1": {"turns": ["kept too"]}})
    await storage.close()
    _backdate(db, [f"conv/{i}" for i in range(3000)], days=31)
    _backdate(db, ["recent/1"], days=29)  # inside the TTL: kept

    again = SqliteStorage(db, ttl_days=30)
    await again.open()
    try:
        with sqlite3.connect(db) as conn:
            keys = {row[0] for row in conn.execute("SELECT key FROM bot_state")}
        assert keys == {"fresh/1", "recent/1"}
        assert (await again.read(["recent/1"]))["recent/1"]["turns"] == ["kept too"]
    finally:
        await again.close()


async def test_state_is_swept_in_the_background_and_the_sweeper_stops_on_close(tmp_path: Path) -> None:
    db = tmp_path / "state.sqlite3"
    storage = SqliteStorage(db, ttl_days=1, sweep_interval=0.05)
    await storage.open()
    try:
        await storage.write({"old": {"x": 1}, "new": {"x": 2}})
        _backdate(db, ["old"], days=2)
        for _ in range(100):
            if not await storage.read(["old"]):
                break
            await asyncio.sleep(0.02)
        assert set(await storage.read(["old", "new"])) == {"new"}
        sweeper = storage._sweeper
        assert sweeper is not None and not sweeper.done()
    finally:
        await storage.close()
    assert sweeper.done()


def test_the_ttl_is_a_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRAG_STATE_TTL_DAYS", "7")
    monkeypatch.setenv("CRAG_STATE_DB", str(tmp_path / "s.sqlite3"))
    storage = make_storage(BotSettings())
    assert isinstance(storage, SqliteStorage) and storage.ttl_days == 7
    monkeypatch.delenv("CRAG_STATE_TTL_DAYS")
    assert BotSettings().state_ttl_days == 30
