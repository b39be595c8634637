"""A damaged feedback or state database, or a torn line in the feedback fallback file, does not stop
the bot: the damaged file is moved aside as `<name>.corrupt-<UTC time>` (an ERROR names it, the
store's `quarantined` lists it), the store starts fresh, and good pending lines are still replayed."""

from __future__ import annotations

import json
import logging
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from bot.state.storage import SqliteStorage
from crag.core.models import Branch, CragResult
from feedback.sqlite_store import FeedbackOutcome, FeedbackStore
from tests.paths import ROOT
from tests.servers.app_process import AppProcess

GARBAGE = b"this is not a database, just bytes left by a bad copy\n" * 40


def _result(question: str) -> CragResult:
    return CragResult(question=question, language="en", branch=Branch.CORRECT, answer=f"answer to {question}")


def _rating_line(result_id: str, user: str = "u") -> str:
    args = {
        "result_id": result_id,
        "reaction": "up",
        "conversation_id": "c",
        "user_id": user,
        "channel_id": "emulator",
        "source": "card",
        "comment": "",
    }
    return json.dumps({"kind": "feedback", "args": args})


def _damage_pages(db: Path) -> None:
    """A valid header, damaged pages: the kind of file a torn copy leaves."""
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE filler (x TEXT)")
        conn.executemany("INSERT INTO filler VALUES (?)", [("x" * 500,)] * 200)
    data = bytearray(db.read_bytes())
    data[4096 * 2 : 4096 * 6] = b"\xa5" * (4096 * 4)
    db.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["garbage", "pages"])
async def test_a_corrupt_feedback_database_is_quarantined(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    db = tmp_path / "fb.sqlite3"
    if damage == "garbage":
        db.write_bytes(GARBAGE)
    else:
        _damage_pages(db)
    original = db.read_bytes()
    store = FeedbackStore(db)
    with caplog.at_level(logging.ERROR):
        await store.open()
    try:
        assert len(store.quarantined) == 1
        moved = Path(store.quarantined[0])
        assert moved.name.startswith("fb.sqlite3.corrupt-") and moved.read_bytes() == original
        assert any(r.levelno == logging.ERROR and str(db) in r.getMessage() for r in caplog.records)
        result = _result("q")
        await store.record_answer(result, "c", "u", "emulator")
        assert (await store.record_feedback(result.id, "up", "c", "u", "emulator")).outcome is (
            FeedbackOutcome.STORED
        )
    finally:
        await store.close()


async def test_a_corrupt_state_database_is_quarantined(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "state.sqlite3"
    db.write_bytes(GARBAGE)
    storage = SqliteStorage(db)
    with caplog.at_level(logging.ERROR):
        await storage.open()
    try:
        assert len(storage.quarantined) == 1
        assert Path(storage.quarantined[0]).read_bytes() == GARBAGE
        assert any(r.levelno == logging.ERROR and str(db) in r.getMessage() for r in caplog.records)
        await storage.write({"k": {"v": 1}})
        assert (await storage.read(["k"]))["k"]["v"] == 1
    finally:
        await storage.close()


async def test_torn_pending_lines_are_quarantined_and_good_ones_replayed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "fb.sqlite3"
    store = FeedbackStore(db)
    await store.open()
    first, second = _result("q1"), _result("q2")
    await store.record_answer(first, "c", "u", "emulator")
    await store.record_answer(second, "c", "u", "emulator")
    await store.close()
    torn = _rating_line(second.id)[:37]  # a write cut short by a crash or a full disk
    wrong = json.dumps({"kind": "feedback", "args": {"result_id": first.id, "bogus": 1}})
    store.pending_path.write_text(f"{_rating_line(first.id)}\n{torn}\n[1, 2]\n{wrong}\n", "utf-8")
    # A replay that crashed after renaming its file leaves '.replaying' behind, itself torn at the end.
    store.replaying_path.write_text(f'{_rating_line(second.id, "v")}\n{{"kind": "fee', "utf-8")

    again = FeedbackStore(db)
    with caplog.at_level(logging.ERROR):
        await again.open()
    try:
        rows = await again.feedback_rows()
        assert sorted((r["result_id"], r["user_id"]) for r in rows) == sorted(
            [(first.id, "u"), (second.id, "v")]
        )
        assert not again.pending_path.exists() and not again.replaying_path.exists()
        kept = "".join(Path(p).read_text("utf-8") for p in sorted(set(again.quarantined)))
        assert torn in kept and "[1, 2]" in kept and '"bogus": 1' in kept and '{"kind": "fee' in kept
        assert any(r.levelno == logging.ERROR and "pending.jsonl" in r.getMessage() for r in caplog.records)
    finally:
        await again.close()


def test_the_app_starts_despite_corrupt_files_and_stops_on_sigterm(tmp_path: Path) -> None:
    app = AppProcess(tmp_path, ROOT / "sample_docs")
    app.feedback_db.write_bytes(GARBAGE)
    (tmp_path / "state.sqlite3").write_bytes(GARBAGE)
    app.feedback_db.with_name("feedback.sqlite3.pending.jsonl").write_text(
        '{"kind": "feedback", "ar', "utf-8"
    )
    app.feedback_db.with_name("feedback.sqlite3.pending.replaying").write_text("\x00\x01 torn", "utf-8")
    try:
        app.start(timeout=90)  # /api/health answers 200
        health = app.health()
        assert health["status"] == "ok"
        moved = {name.split(".corrupt-")[0] for name in health["quarantined_files"]}
        assert {"feedback.sqlite3", "state.sqlite3", "feedback.sqlite3.pending.jsonl"} <= moved
        log = app.log()
        assert "feedback.sqlite3 is corrupt" in log and "state.sqlite3 is corrupt" in log
        assert "could not be replayed" in log
        names = {p.name.split(".corrupt-")[0] for p in tmp_path.glob("*.corrupt-*")}
        assert names == {"feedback.sqlite3", "state.sqlite3", "feedback.sqlite3.pending.jsonl"}
        assert app.proc is not None
        app.proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        app.proc.wait(15)
        assert time.monotonic() - started < 15
    finally:
        app.stop()


async def test_the_runtime_lists_quarantined_feedback_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.bot_runtime import BotRuntime
    from hosting.app_settings import BotSettings

    db = tmp_path / "feedback.sqlite3"
    db.write_bytes(GARBAGE)
    monkeypatch.setenv("CRAG_FEEDBACK_DB", str(db))
    runtime = BotRuntime(BotSettings())
    await runtime.start()
    try:
        assert [Path(p).name.split(".corrupt-")[0] for p in runtime.quarantined] == ["feedback.sqlite3"]
    finally:
        await runtime.close()
