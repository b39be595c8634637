"""The PostgreSQL feedback store against a real server (tests/servers/postgres.py): the guarantees of
the SQLite store (acknowledged == stored, one rating per user and answer, unknown answers refused,
writes kept in the fallback file while the server is down and replayed once each), the numbered
migrations, and `python -m feedback` reading it."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest

from bot.bot_runtime import BotRuntime
from crag.core.models import Branch, CragResult
from feedback.postgres_schema import LATEST, MIGRATIONS, migrate, schema_version
from feedback.postgres_store import FeedbackDatabaseError, PostgresFeedbackStore
from feedback.protocol import FeedbackOutcome
from hosting.app_settings import BotSettings
from hosting.redact import secret_values
from tests.paths import ROOT
from tests.servers.postgres import PostgresServer, feedback_cli


def _result(question: str, language: str = "en", branch: Branch = Branch.CORRECT) -> CragResult:
    return CragResult(question=question, language=language, branch=branch, answer=f"answer to {question}")


@pytest.fixture
async def store(postgres_dsn: str, tmp_path: Path) -> AsyncIterator[PostgresFeedbackStore]:
    # No background replay: the tests replay when they mean to (and count what was replayed).
    s = PostgresFeedbackStore(postgres_dsn, tmp_path / "pg.pending.jsonl", replay_interval=3600)
    await s.open()
    yield s
    await s.close()


async def _count(dsn: str, query: str, *args: object) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval(query, *args))
    finally:
        await conn.close()


async def test_a_rating_is_committed_when_acknowledged_updated_once_and_refused_for_unknown_answers(
    store: PostgresFeedbackStore, postgres_dsn: str, tmp_path: Path
) -> None:
    result = _result("有給の繰越しは？", "ja")
    card = {"type": "AdaptiveCard", "body": [{"type": "TextBlock", "text": "20日"}]}
    await store.record_answer(result, "conv-1", "user-1", "msteams", card)
    first = await store.record_feedback(result.id, "up", "conv-1", "user-1", "msteams")
    assert first.outcome is FeedbackOutcome.STORED and first.language == "ja"
    # Acknowledged means committed: another connection (another instance) sees the row now.
    assert (
        await _count(postgres_dsn, "SELECT count(*) FROM answer_feedback WHERE result_id = $1", result.id)
        == 1
    )
    second = await store.record_feedback(
        result.id, "down", "conv-1", "user-1", "msteams", comment="too short"
    )
    assert second.outcome is FeedbackOutcome.UPDATED
    # Another conversation cannot rate this answer; an unknown id is refused.
    other = await store.record_feedback(result.id, "up", "conv-2", "user-2", "msteams")
    unknown = await store.record_feedback("f" * 32, "up", "conv-1", "user-1", "msteams")
    assert other.outcome is unknown.outcome is FeedbackOutcome.UNKNOWN_ANSWER
    rows = await store.feedback_rows()
    assert len(rows) == 1
    row = rows[0]
    assert (row["reaction"], row["comment"], row["question"], row["branch"]) == (
        "down",
        "too short",
        result.question,
        "correct",
    )
    assert (
        row["user_id"] == "user-1"
        and row["conversation_id"] == "conv-1"
        and json.loads(row["cited_files"]) == []
    )
    assert row["created_at"].startswith(row["created_at"][:10]) and "T" in row["updated_at"]  # ISO text
    # A rating without a comment keeps the one given before.
    await store.record_feedback(result.id, "up", "conv-1", "user-1", "msteams")
    assert (await store.feedback_rows())[0]["comment"] == "too short"
    # The reads the bot makes: the stored card, the answer of a message id (and of none: no guess).
    assert await store.stored_card(result.id) == card
    await store.set_message_id(result.id, "msg-9")
    assert await store.answer_for_message("conv-1", "msg-9") == result.id
    assert await store.answer_for_message("conv-1", None) is None
    assert await store.answer_for_message("conv-1", "msg-other") is None
    assert await store.answer_for_message("conv-2", None) is None
    assert not store.pending_path.exists()
    # Another instance on the same database sees the same rows.
    again = PostgresFeedbackStore(postgres_dsn, tmp_path / "other.pending.jsonl")
    await again.open()
    try:
        assert [r["id"] for r in await again.feedback_rows()] == [row["id"]]
    finally:
        await again.close()


async def test_text_postgres_cannot_hold_is_stored_without_it(store: PostgresFeedbackStore) -> None:
    result = _result("nul\x00byte")
    await store.record_answer(result, "c", "u", "emulator")
    receipt = await store.record_feedback(result.id, "up", "c", "u", "emulator", comment="a\x00b")
    assert receipt.outcome is FeedbackOutcome.STORED
    [row] = await store.feedback_rows()
    assert row["question"] == "nulbyte" and row["comment"] == "ab"


async def test_concurrent_ratings_from_two_instances_land_once_each(
    postgres_dsn: str, tmp_path: Path
) -> None:
    one = PostgresFeedbackStore(postgres_dsn, tmp_path / "one.pending.jsonl", pool_size=5)
    two = PostgresFeedbackStore(postgres_dsn, tmp_path / "two.pending.jsonl", pool_size=5)
    await asyncio.gather(one.open(), two.open())
    try:
        results = [_result(f"q{i}") for i in range(60)]
        await asyncio.gather(*(one.record_answer(r, "c", "asker", "emulator") for r in results))
        users = [f"u{j}" for j in range(4)]
        # Every user rates every answer twice at once, once through each instance.
        calls = [
            (r.id, user, s.record_feedback(r.id, reaction, "c", user, "emulator"))
            for r in results
            for user in users
            for s, reaction in ((one, "up"), (two, "down"))
        ]
        receipts = await asyncio.gather(*(call for _, _, call in calls))
    finally:
        await asyncio.gather(one.close(), two.close())
    by_pair: dict[tuple[str, str], Counter[FeedbackOutcome]] = {}
    for (rid, user, _), receipt in zip(calls, receipts, strict=True):
        by_pair.setdefault((rid, user), Counter())[receipt.outcome] += 1
    # Of two ratings of the same answer by the same user, one inserted the row and one updated it.
    assert all(
        c == Counter({FeedbackOutcome.STORED: 1, FeedbackOutcome.UPDATED: 1}) for c in by_pair.values()
    )
    assert await _count(postgres_dsn, "SELECT count(*) FROM answer_feedback") == len(by_pair) == 240
    assert (
        await _count(postgres_dsn, "SELECT count(DISTINCT (result_id, user_id)) FROM answer_feedback") == 240
    )
    assert not (tmp_path / "one.pending.jsonl").exists() and not (tmp_path / "two.pending.jsonl").exists()


async def test_while_postgres_is_down_writes_are_kept_and_replayed_once_each(
    store: PostgresFeedbackStore, postgres_server: PostgresServer, postgres_dsn: str
) -> None:
    before = [_result(f"before {i}") for i in range(5)]
    for r in before:
        await store.record_answer(r, "c", "asker", "emulator")
    await store.record_feedback(before[0].id, "up", "c", "u0", "emulator")  # stored before the outage
    during = [_result(f"during {i}") for i in range(5)]
    with postgres_server.stopped():
        receipts = [await store.record_feedback(r.id, "down", "c", "u1", "emulator") for r in before]
        for r in during:  # answered while the server is down: kept, and rateable
            await store.record_answer(r, "c", "asker", "emulator")
            await store.set_message_id(r.id, f"m-{r.id}")
        receipts += [await store.record_feedback(r.id, "up", "c", "u2", "emulator") for r in during]
        # The first rating again, changed, while down: it must end as one row with the new reaction.
        receipts.append(await store.record_feedback(before[0].id, "down", "c", "u0", "emulator"))
        assert {r.outcome for r in receipts} == {FeedbackOutcome.PENDING}
        kept = [json.loads(line) for line in store.pending_path.read_text("utf-8").splitlines()]
        assert Counter(e["kind"] for e in kept) == {"feedback": 11, "answer": 5, "message_id": 5}
        with pytest.raises(Exception) as read_error:  # a read cannot be kept: the caller hears of it
            await store.answer_for_message("c", "m-unknown")
        assert not isinstance(read_error.value, AssertionError)
    assert await store.replay_pending() == 21
    assert not store.pending_path.exists()
    assert await store.replay_pending() == 0
    rows = await store.feedback_rows()
    pairs = Counter((r["result_id"], r["user_id"]) for r in rows)
    assert len(rows) == 11 and set(pairs.values()) == {1}
    assert {(r["user_id"], r["reaction"]) for r in rows if r["result_id"] == before[0].id} == {
        ("u1", "down"),
        ("u0", "down"),
    }
    assert await store.answer_for_message("c", f"m-{during[3].id}") == during[3].id
    # Once the server is back, new writes are committed again.
    late = await store.record_feedback(during[0].id, "down", "c", "u2", "emulator")
    assert late.outcome is FeedbackOutcome.UPDATED
    assert await _count(postgres_dsn, "SELECT count(*) FROM answers") == 10


async def test_a_rating_and_its_answer_kept_by_two_instances_during_an_outage_land_once(
    postgres_server: PostgresServer, postgres_dsn: str, tmp_path: Path
) -> None:
    one = PostgresFeedbackStore(postgres_dsn, tmp_path / "one.pending.jsonl", replay_interval=3600)
    two = PostgresFeedbackStore(postgres_dsn, tmp_path / "two.pending.jsonl", replay_interval=3600)
    await asyncio.gather(one.open(), two.open())
    try:
        result = _result("asked of one, rated through two")
        with postgres_server.stopped():
            await one.record_answer(result, "c", "asker", "msteams")
            receipt = await two.record_feedback(result.id, "up", "c", "asker", "msteams")
            assert receipt.outcome is FeedbackOutcome.PENDING
        # Two replays first: the answer is still in one's file. The rating is held, not dropped.
        assert await two.replay_pending() == 0
        assert two.pending.has_held() and not two.pending.exists()
        assert await one.replay_pending() == 1
        assert await two.replay_pending() == 1
        assert not two.pending.has_held()
        rows = await one.feedback_rows()
        assert [(r["result_id"], r["user_id"], r["reaction"]) for r in rows] == [(result.id, "asker", "up")]
    finally:
        await asyncio.gather(one.close(), two.close())
    # Past the hold (here: none), a rating of an answer that never arrives is kept as an unattributed
    # rating (it was acknowledged), as with SQLite: on no answer, and not dropped.
    strict = PostgresFeedbackStore(postgres_dsn, tmp_path / "s.pending.jsonl", hold_unknown=0)
    await strict.open()
    try:
        with postgres_server.stopped():
            await strict.record_feedback("0" * 32, "up", "c", "asker", "msteams")
        assert await strict.replay_pending() == 1
        assert not strict.pending.exists() and not strict.pending.has_held()
        [kept] = await strict.unattributed_since(datetime(2000, 1, 1, tzinfo=UTC))
        assert (kept.named_id, kept.reaction) == ("0" * 32, "up")
        assert len(await strict.feedback_rows()) == 1  # only the rating of the answer that did arrive
    finally:
        await strict.close()


async def test_instances_on_one_host_may_share_the_pending_file(
    postgres_server: PostgresServer, postgres_dsn: str, tmp_path: Path
) -> None:
    shared = tmp_path / "shared.pending.jsonl"
    stores = [PostgresFeedbackStore(postgres_dsn, shared, replay_interval=3600) for _ in range(3)]
    await asyncio.gather(*(s.open() for s in stores))
    try:
        results = [_result(f"q{i}") for i in range(30)]
        with postgres_server.stopped():
            for i, r in enumerate(results):
                await stores[i % 3].record_answer(r, "c", "asker", "emulator")
            receipts = await asyncio.gather(
                *(
                    stores[(i + 1) % 3].record_feedback(r.id, "up", "c", "u", "emulator")
                    for i, r in enumerate(results)
                )
            )
            assert {r.outcome for r in receipts} == {FeedbackOutcome.PENDING}
            assert len(shared.read_text("utf-8").splitlines()) == 60
        # All replay at once: one takes the file, the others leave it to it; each row lands once.
        replayed = await asyncio.gather(*(s.replay_pending() for s in stores))
        assert sum(replayed) == 60 and sorted(replayed)[:2] == [0, 0]
        assert not shared.exists() and not stores[0].pending.replaying_path.exists()
        assert await _count(postgres_dsn, "SELECT count(*) FROM answer_feedback") == 30
        assert await _count(postgres_dsn, "SELECT count(*) FROM answers") == 30
    finally:
        await asyncio.gather(*(s.close() for s in stores))


async def test_the_file_is_replayed_in_the_background_without_new_writes(
    postgres_server: PostgresServer, postgres_dsn: str, tmp_path: Path
) -> None:
    store = PostgresFeedbackStore(postgres_dsn, tmp_path / "pg.pending.jsonl", replay_interval=0.05)
    await store.open()
    try:
        result = _result("q")
        await store.record_answer(result, "c", "u", "emulator")
        with postgres_server.stopped():
            receipt = await store.record_feedback(result.id, "down", "c", "u", "emulator")
            assert receipt.outcome is FeedbackOutcome.PENDING
        # No write comes: the store's own task replays the file once the server is back.
        for _ in range(600):
            if not store.pending.exists():
                break
            await asyncio.sleep(0.05)
        assert not store.pending.exists()
        assert [r["reaction"] for r in await store.feedback_rows()] == ["down"]
    finally:
        await store.close()


async def test_a_store_started_while_postgres_is_down_keeps_writes_for_the_next_start(
    postgres_server: PostgresServer, postgres_dsn: str, tmp_path: Path
) -> None:
    pending = tmp_path / "pg.pending.jsonl"
    result = _result("q")
    with postgres_server.stopped():
        down = PostgresFeedbackStore(postgres_dsn, pending)
        await down.open()  # does not stop the bot: the schema comes with the first write that gets through
        await down.record_answer(result, "c", "u", "msteams")
        assert (
            await down.record_feedback(result.id, "up", "c", "u", "msteams")
        ).outcome is FeedbackOutcome.PENDING
        await down.close()  # the process stops while the server is still down
    assert await _count(postgres_dsn, "SELECT count(*) FROM pg_tables WHERE tablename = 'answers'") == 0
    up = PostgresFeedbackStore(postgres_dsn, pending)
    await up.open()  # migrates, then replays what was kept
    try:
        assert not pending.exists()
        rows = await up.feedback_rows()
        assert [(r["result_id"], r["reaction"]) for r in rows] == [(result.id, "up")]
    finally:
        await up.close()


async def test_an_older_schema_is_upgraded_in_place_with_its_data(postgres_dsn: str, tmp_path: Path) -> None:
    conn = await asyncpg.connect(postgres_dsn)
    try:
        assert await migrate(conn, target=1) == [1]
        assert await schema_version(conn) == 1
        await conn.execute(
            "INSERT INTO answers VALUES ('old-1', now(), 'c', 'u', 'msteams', 'en', 'old q', 'old a',"
            " 'correct', '[\"a.md\"]', '[]')"
        )
        await conn.execute(
            "INSERT INTO answer_feedback (created_at, updated_at, result_id, reaction, comment, source,"
            " question, answer, branch, cited_files, conversation_id, user_id, channel_id)"
            " VALUES (now(), now(), 'old-1', 'up', 'kept', 'card', 'old q', 'old a', 'correct', '[\"a.md\"]',"
            " 'c', 'u', 'msteams')"
        )
    finally:
        await conn.close()
    store = PostgresFeedbackStore(postgres_dsn, tmp_path / "pg.pending.jsonl")
    await store.open()
    try:
        conn = await asyncpg.connect(postgres_dsn)
        try:
            assert await schema_version(conn) == LATEST == 5
            versions = [
                r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations ORDER BY 1")
            ]
            assert versions == [m.version for m in MIGRATIONS]
        finally:
            await conn.close()
        [row] = await store.feedback_rows()
        assert (row["result_id"], row["reaction"], row["comment"]) == ("old-1", "up", "kept")
        # The columns the new version added work on the old rows.
        assert await store.stored_card("old-1") is None
        await store.set_message_id("old-1", "m-old")
        assert await store.answer_for_message("c", "m-old") == "old-1"
        assert (
            await store.record_feedback("old-1", "down", "c", "u", "msteams")
        ).outcome is FeedbackOutcome.UPDATED
    finally:
        await store.close()


async def test_instances_starting_at_once_apply_each_migration_once(
    postgres_dsn: str, tmp_path: Path
) -> None:
    stores = [
        PostgresFeedbackStore(postgres_dsn, tmp_path / f"{i}.pending.jsonl", pool_size=2) for i in range(6)
    ]
    await asyncio.gather(*(s.open() for s in stores))
    try:
        conn = await asyncpg.connect(postgres_dsn)
        try:
            versions = [
                r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations ORDER BY 1")
            ]
        finally:
            await conn.close()
        assert versions == [m.version for m in MIGRATIONS]
        result = _result("q")
        await stores[0].record_answer(result, "c", "u", "emulator")
        assert (
            await stores[5].record_feedback(result.id, "up", "c", "u", "emulator")
        ).outcome is FeedbackOutcome.STORED
    finally:
        await asyncio.gather(*(s.close() for s in stores))


async def test_a_server_that_refuses_the_store_is_a_clear_error_at_start(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    missing = f"postgresql://postgres:Xyzzy-pw-123@127.0.0.1:{postgres_server.port}/no_such_database"
    store = PostgresFeedbackStore(missing, tmp_path / "pg.pending.jsonl")
    with pytest.raises(FeedbackDatabaseError) as refused:
        await store.open()
    message = str(refused.value)
    assert f"127.0.0.1:{postgres_server.port}/no_such_database refused the store" in message
    assert 'no_such_database" does not exist' in message and "Xyzzy-pw-123" not in message
    assert not (tmp_path / "pg.pending.jsonl").exists()


async def test_the_feedback_cli_migrates_exports_and_counts_postgres(
    postgres_dsn: str, tmp_path: Path
) -> None:
    first = await asyncio.to_thread(feedback_cli, postgres_dsn, "migrate")
    assert first.returncode == 0 and "version 5 (applied 1, 2, 3, 4, 5)" in first.stderr
    again = await asyncio.to_thread(feedback_cli, postgres_dsn, "migrate")
    assert again.returncode == 0 and "nothing to apply" in again.stderr
    store = PostgresFeedbackStore(postgres_dsn, tmp_path / "pg.pending.jsonl")
    await store.open()
    try:
        for i, (branch, reaction) in enumerate(
            [(Branch.CORRECT, "up"), (Branch.CORRECT, "down"), (Branch.INCORRECT, "up")]
        ):
            r = CragResult(question=f"=質問{i}", language="ja", branch=branch, answer="回答, with a comma")
            await store.record_answer(r, "c", f"u{i}", "msteams")
            await store.record_feedback(r.id, reaction, "c", f"u{i}", "msteams", comment='said "ok"')  # type: ignore[arg-type]
        await store.record_unattributed("down", "c", "u9", "msteams", "teams", named_id="gone-7")
    finally:
        await store.close()
    exported = await asyncio.to_thread(feedback_cli, postgres_dsn, "export")
    assert exported.returncode == 0, exported.stderr
    rows = list(csv.DictReader(io.StringIO(exported.stdout)))
    assert [r["question"] for r in rows] == [
        "'=質問0",
        "'=質問1",
        "'=質問2",
    ]  # formulas defused as for SQLite
    assert rows[0]["comment"] == 'said "ok"' and rows[0]["id"] == "1" and rows[0]["reaction"] == "up"
    out = tmp_path / "f.jsonl"
    jsonl = await asyncio.to_thread(
        feedback_cli, postgres_dsn, "export", "--format", "jsonl", "--out", str(out)
    )
    assert jsonl.returncode == 0 and "exported 3 ratings" in jsonl.stderr
    lines = [json.loads(x) for x in out.read_text("utf-8").splitlines()]
    assert [x["reaction"] for x in lines] == ["up", "down", "up"] and lines[0]["cited_files"] == []
    stats = await asyncio.to_thread(feedback_cli, postgres_dsn, "stats", "--json")
    summary = json.loads(stats.stdout)
    assert summary["by_branch"] == {
        "correct": {"up": 1, "down": 1},
        "incorrect": {"up": 1, "down": 0},
        "unattributed": {"up": 0, "down": 1},  # the rating that named no known answer
    }
    assert sum(v["up"] + v["down"] for v in summary["by_day"].values()) == 4
    apart = await asyncio.to_thread(
        feedback_cli, postgres_dsn, "export", "--unattributed", "--format", "jsonl"
    )
    assert [(r["reaction"], r["named_id"]) for r in map(json.loads, apart.stdout.splitlines())] == [
        ("down", "gone-7")
    ]


def test_the_cli_says_what_failed_without_the_password(postgres_server: PostgresServer) -> None:
    closed = f"postgresql://bob:Sup3r-s3cret-pw@127.0.0.1:{postgres_server.port + 1}/nowhere"
    failed = feedback_cli(closed, "stats")
    assert failed.returncode == 2 and failed.stderr.startswith("error:")
    assert "Sup3r-s3cret-pw" not in failed.stderr + failed.stdout and "Traceback" not in failed.stderr
    no_schema = feedback_cli(postgres_server.dsn(), "stats")
    assert no_schema.returncode == 2 and "python -m feedback migrate" in no_schema.stderr


def test_settings_choose_the_store_and_a_bad_postgres_setting_is_refused_clearly(tmp_path: Path) -> None:
    sqlite = BotRuntime(BotSettings(CRAG_FEEDBACK_DB=str(tmp_path / "fb.sqlite3")))
    assert type(sqlite.feedback).__name__ == "FeedbackStore"  # the zero-setup default is unchanged
    dsn = "postgresql://bot:Pa55-w0rd-x@db.example:5432/crag"
    chosen = BotRuntime(
        BotSettings(
            CRAG_FEEDBACK_STORE="postgres", CRAG_POSTGRES_URL=dsn, CRAG_FEEDBACK_DB=str(tmp_path / "x")
        )
    )
    assert isinstance(chosen.feedback, PostgresFeedbackStore)
    assert chosen.feedback.pending_path == tmp_path / "feedback-postgres.pending.jsonl"
    assert chosen.feedback.where == "db.example:5432/crag"
    with pytest.raises(ValueError, match="needs CRAG_POSTGRES_URL"):
        BotRuntime(BotSettings(CRAG_FEEDBACK_STORE="postgres"))
    for bad in ("mysql://bot:Pa55-w0rd-x@db/crag", "postgresql://bot:Pa55-w0rd-x@db:port/crag"):
        with pytest.raises(ValueError) as refused:
            BotRuntime(BotSettings(CRAG_FEEDBACK_STORE="postgres", CRAG_POSTGRES_URL=bad))
        assert "CRAG_POSTGRES_URL" in str(refused.value) and "Pa55-w0rd-x" not in str(refused.value)
    with pytest.raises(ValueError, match="CRAG_FEEDBACK_STORE"):
        BotSettings(CRAG_FEEDBACK_STORE="mongodb")
    # The log filter masks the DSN and, on its own, its password.
    secrets = secret_values(BotSettings(CRAG_POSTGRES_URL=dsn))
    assert dsn in secrets and "Pa55-w0rd-x" in secrets


def test_without_postgres_the_tests_skip_unless_services_are_required(tmp_path: Path) -> None:
    def run(**env: str) -> subprocess.CompletedProcess[str]:
        clean = {k: v for k, v in os.environ.items() if k != "CRAG_REQUIRE_SERVICES"}
        nodeid = (
            "tests/feedback/test_feedback_postgres.py::test_text_postgres_cannot_hold_is_stored_without_it"
        )
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", nodeid],
            cwd=ROOT,
            env={**clean, "CRAG_POSTGRES_BINDIR": str(tmp_path / "no-postgres-here"), **env},
            capture_output=True,
            text=True,
            timeout=120,
        )

    skipped = run()
    assert skipped.returncode == 0 and "1 skipped" in skipped.stdout
    assert "PostgreSQL is not installed" in skipped.stdout
    required = run(CRAG_REQUIRE_SERVICES="1")
    assert required.returncode == 1 and "1 error" in required.stdout
    assert "PostgreSQL is not installed" in required.stdout and "CRAG_REQUIRE_SERVICES=1" in required.stdout
