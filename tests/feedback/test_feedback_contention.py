"""Acknowledged ratings survive lock contention: while another process keeps taking short exclusive
locks on the feedback database, every rating the store acknowledged (stored, updated or kept in the
fallback file) is in the database once the fallback file was replayed."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from crag.core.models import Branch, CragResult
from feedback.sqlite_store import FeedbackOutcome, FeedbackStore

ACKNOWLEDGED = {FeedbackOutcome.STORED, FeedbackOutcome.UPDATED, FeedbackOutcome.PENDING}

# A second OS process: exclusive lock for 10-60 ms, released for 5-30 ms, until the stop file appears;
# the third hold and every tenth after it last 2 s, beyond the store's busy timeout and retries, so the
# fallback file is used too (early: on a loaded machine the writes may be done within a few holds).
LOCKER = textwrap.dedent(
    """
    import random, sqlite3, sys, time
    from pathlib import Path
    db, stop = sys.argv[1], Path(sys.argv[2])
    conn = sqlite3.connect(db, timeout=10, isolation_level=None)
    conn.execute("CREATE TABLE IF NOT EXISTS locker_noise (n INTEGER)")
    rnd = random.Random(12)
    print("ready", flush=True)
    locks = 0
    while not stop.exists():
        conn.execute("BEGIN EXCLUSIVE")
        conn.execute("INSERT INTO locker_noise VALUES (?)", (locks,))
        locks += 1
        time.sleep(2.0 if locks % 10 == 3 else rnd.uniform(0.01, 0.06))
        conn.execute("COMMIT")
        time.sleep(rnd.uniform(0.005, 0.03))
    print(locks, flush=True)
    """
)


def _result(i: int) -> CragResult:
    return CragResult(question=f"q{i}", language="en", branch=Branch.CORRECT, answer=f"answer {i}")


@pytest.mark.parametrize("answers_under_contention", [True, False], ids=["answers-and-ratings", "ratings"])
async def test_acknowledged_ratings_are_stored_under_lock_contention(
    tmp_path: Path, answers_under_contention: bool
) -> None:
    db = tmp_path / "fb.sqlite3"
    stop = tmp_path / "stop"
    store = FeedbackStore(db)
    await store.open()
    early: list[str] = []
    if not answers_under_contention:  # every answer is in the database before the locker starts
        for i in range(600):
            result = _result(i)
            await store.record_answer(result, "c", f"u{i}", "emulator")
            early.append(result.id)
    locker = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(db), str(stop)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert locker.stdout is not None
        assert locker.stdout.readline().strip() == "ready"

        async def answer(i: int) -> str | None:
            if early:
                return early[i]
            result = _result(i)
            await asyncio.sleep(i * 0.0025)  # arrivals spread over 1.5 s
            try:
                await store.record_answer(result, "c", f"u{i}", "emulator")
            except Exception:  # the answer is sent anyway; its ratings would be refused
                return None
            return result.id

        async def rate(i: int, result_id: str) -> FeedbackOutcome | None:
            await asyncio.sleep(i * 0.0025)
            try:
                return (await store.record_feedback(result_id, "up", "c", f"u{i}", "emulator")).outcome
            except Exception:  # an error is no acknowledgement: the user is told it failed
                return None

        started = time.monotonic()
        answered = await asyncio.gather(*(answer(i) for i in range(600)))
        given = {i: rid for i, rid in enumerate(answered) if rid}
        rated = dict(
            zip(given.values(), await asyncio.gather(*(rate(i, r) for i, r in given.items())), strict=True)
        )
        elapsed = time.monotonic() - started
    finally:
        stop.touch()
        out, _ = locker.communicate(timeout=30)
    locks = int(out.split()[-1])
    await store.replay_pending()
    await store.close()
    acknowledged = {rid for rid, outcome in rated.items() if outcome in ACKNOWLEDGED}
    refused = {rid for rid, outcome in rated.items() if outcome is FeedbackOutcome.UNKNOWN_ANSWER}
    with sqlite3.connect(db) as conn:
        answers = {row[0] for row in conn.execute("SELECT result_id FROM answers")}
        stored = {row[0] for row in conn.execute("SELECT result_id FROM answer_feedback")}
    lost = acknowledged - stored
    counts = {str(o): sum(1 for x in rated.values() if x == o) for o in set(rated.values())}
    print(
        f"locks={locks} elapsed={elapsed:.1f}s answers_given={len(given)}"
        f" answers_lost={len(set(given.values()) - answers)}"
        f" ratings={counts} refused_as_unknown={len(refused)} lost={len(lost)}/{len(acknowledged)}"
    )
    assert locks >= 4, "the locker process hardly ran: no long hold during the writes"
    assert set(given.values()) <= answers, "answers whose recording returned are missing"
    assert not refused, f"{len(refused)} ratings of recorded answers were refused as unknown"
    assert not lost, f"{len(lost)} of {len(acknowledged)} acknowledged ratings are not stored"
    assert len(given) >= 590 and len(acknowledged) >= 590  # contention delays writes; it must not refuse them
