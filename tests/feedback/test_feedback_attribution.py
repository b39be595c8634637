"""A rating is attached to the answer it names and to no other, in both stores (SQLite, and PostgreSQL
against a real server): every id an answer's message was sent under finds that answer; no id, an
unknown id or another conversation's id finds none (never "the latest answer"); a rating that names
no known answer is kept apart as an unattributed rating; a rating kept in the fallback file whose
answer never reached the database becomes one instead of being dropped; and databases of the
previous schema keep their message ids."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from crag.core.models import Branch, CragResult
from feedback.postgres_schema import migrate
from feedback.postgres_store import PostgresFeedbackStore
from feedback.protocol import Feedback, FeedbackOutcome
from feedback.sqlite_store import FeedbackStore
from tests.servers.postgres import PostgresServer

EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


def _result(question: str) -> CragResult:
    return CragResult(question=question, language="en", branch=Branch.CORRECT, answer=f"answer to {question}")


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Feedback]:
    s: Feedback
    server: PostgresServer | None = None
    if request.param == "sqlite":
        s = FeedbackStore(tmp_path / "fb.sqlite3")
    else:
        # The session's server (skipped without PostgreSQL, a failure under .ci/run), a fresh database.
        server = request.getfixturevalue("postgres_server")
        name = await server.create_database()
        s = PostgresFeedbackStore(server.dsn(name), tmp_path / "pg.pending.jsonl", replay_interval=3600)
    await s.open()
    yield s
    await s.close()
    if server is not None:
        await server.drop_database(name)


async def test_each_id_of_an_answer_finds_it_and_nothing_else_finds_any(store: Feedback) -> None:
    older, latest = _result("monthly allowance?"), _result("capital of Australia?")
    for r in (older, latest):
        await store.record_answer(r, "conv-1", "user-1", "msteams")
    await store.set_message_id(older.id, "stream-1", "stream")
    await store.set_message_id(older.id, "sent-1", "sent")
    await store.set_message_id(latest.id, "stream-2", "stream")
    # The same id again (Teams returns the stream id for the final message): still the same answer.
    await store.set_message_id(latest.id, "stream-2", "sent")

    assert await store.answer_for_message("conv-1", "stream-1") == older.id
    assert await store.answer_for_message("conv-1", "sent-1") == older.id
    assert await store.answer_for_message("conv-1", "stream-2") == latest.id
    # No id, an unknown one, or a known one in another conversation: no answer, not the latest.
    for conversation, named in [("conv-1", None), ("conv-1", ""), ("conv-1", "nope"), ("conv-2", "sent-1")]:
        assert await store.answer_for_message(conversation, named) is None
    # An id already naming an answer keeps naming it: a second answer cannot take it over.
    await store.set_message_id(latest.id, "sent-1", "sent")
    assert await store.answer_for_message("conv-1", "sent-1") == older.id
    with pytest.raises(ValueError, match="kind of message id"):
        await store.set_message_id(older.id, "x", "reply")  # type: ignore[arg-type]


async def test_a_rating_naming_no_known_answer_is_kept_apart(store: Feedback) -> None:
    answer = _result("monthly allowance?")
    await store.record_answer(answer, "conv-1", "user-1", "msteams")
    receipt = await store.record_unattributed(
        "up", "conv-1", "user-1", "msteams", "teams", comment="clear", named_id="unknown-message"
    )
    assert receipt.outcome is FeedbackOutcome.UNATTRIBUTED
    await store.record_unattributed("down", "conv-1", "user-2", "msteams", "teams")
    assert await store.feedback_rows() == []  # on no answer
    kept = await store.unattributed_since(EPOCH)
    assert [(u.reaction, u.comment, u.source, u.named_id, u.channel_id) for u in kept] == [
        ("down", "", "teams", "", "msteams"),  # newest first
        ("up", "clear", "teams", "unknown-message", "msteams"),
    ]
    assert await store.unattributed_since(datetime.now(UTC) + timedelta(minutes=1)) == []
    with pytest.raises(ValueError):
        await store.record_unattributed("love", "conv-1", "user-1", "msteams", "teams")  # type: ignore[arg-type]


async def test_a_kept_rating_whose_answer_never_arrived_becomes_unattributed(
    store: Feedback, tmp_path: Path
) -> None:
    # What a crash leaves: a rating in the fallback file of an answer the database never got.
    line = {
        "kind": "feedback",
        "args": {
            "result_id": "a" * 32,
            "reaction": "down",
            "conversation_id": "conv-1",
            "user_id": "user-1",
            "channel_id": "webchat",
            "source": "card",
            "comment": "wrong",
        },
        "kept_at": (datetime.now(UTC) - timedelta(hours=2)).isoformat(),  # past PostgreSQL's hour
    }
    store.pending_path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    await store.replay_pending()
    assert not store.pending_path.exists()
    [kept] = await store.unattributed_since(EPOCH)
    assert (kept.reaction, kept.comment, kept.source, kept.named_id) == ("down", "wrong", "card", "a" * 32)
    assert kept.created_at.isoformat() == line["kept_at"]  # when it was given, not when replayed
    assert await store.feedback_rows() == []


async def test_a_sqlite_file_of_the_previous_schema_keeps_its_message_ids(tmp_path: Path) -> None:
    db = tmp_path / "fb.sqlite3"
    first = FeedbackStore(db)
    await first.open()
    answer = _result("monthly allowance?")
    await first.record_answer(answer, "conv-1", "user-1", "msteams")
    await first.close()
    # As the previous release left it: the id in the answer row, no answer_messages table.
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE answer_messages")
        conn.execute("DROP TABLE unattributed_feedback")
        conn.execute("UPDATE answers SET message_id = 'old-msg'")
    again = FeedbackStore(db)
    await again.open()
    try:
        assert await again.answer_for_message("conv-1", "old-msg") == answer.id
        assert (
            await again.record_feedback(answer.id, "up", "conv-1", "user-1", "msteams")
        ).outcome is FeedbackOutcome.STORED
        assert await again.unattributed_since(EPOCH) == []
    finally:
        await again.close()


async def test_a_postgres_database_of_the_previous_schema_keeps_its_message_ids(
    postgres_dsn: str, tmp_path: Path
) -> None:
    conn = await asyncpg.connect(postgres_dsn)
    try:
        assert await migrate(conn, target=4) == [1, 2, 3, 4]
        await conn.execute(
            "INSERT INTO answers (result_id, created_at, conversation_id, user_id, channel_id, language,"
            " question, answer, branch, cited_files, web_urls, message_id)"
            " VALUES ('old-1', now(), 'c', 'u', 'msteams', 'en', 'q', 'a', 'correct', '[]', '[]', 'old-msg')"
        )
    finally:
        await conn.close()
    store = PostgresFeedbackStore(postgres_dsn, tmp_path / "pg.pending.jsonl", replay_interval=3600)
    await store.open()  # migrates to the latest version
    try:
        assert await store.answer_for_message("c", "old-msg") == "old-1"
        assert await store.answer_for_message("c", None) is None
    finally:
        await store.close()
