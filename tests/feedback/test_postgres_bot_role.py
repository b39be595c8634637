"""The bot's own PostgreSQL role (feedback/postgres_roles.py), on a real server: the migration
(run by another role, as Azure's migration job runs it) makes the role and grants it the feedback
tables only; the bot, not migrating, writes answers and ratings and can change nothing else; a bot
started before the migration keeps its acknowledged ratings until the schema is there."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from crag.core.models import Branch, CragResult
from feedback.postgres_store import PostgresFeedbackStore, migrate_database
from feedback.protocol import FeedbackOutcome
from tests.servers.postgres import feedback_cli


def _as(dsn: str, role: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port}"))


def _result(question: str) -> CragResult:
    return CragResult(question=question, language="en", branch=Branch.CORRECT, answer=f"answer to {question}")


@pytest.fixture
async def bot_role(postgres_dsn: str) -> AsyncIterator[str]:
    role = f"bot_{uuid.uuid4().hex[:8]}"
    yield role
    conn = await asyncpg.connect(postgres_dsn)
    try:  # roles are cluster-wide: the test's database is dropped, its role must be too
        await conn.execute(f"DROP OWNED BY {role}; DROP ROLE IF EXISTS {role}")
    finally:
        await conn.close()


async def test_the_bot_role_writes_feedback_and_can_change_nothing_else(
    postgres_dsn: str, bot_role: str, tmp_path: Path
) -> None:
    applied, version = await migrate_database(postgres_dsn, grant=bot_role)
    assert applied and version == applied[-1]
    admin = await asyncpg.connect(postgres_dsn)
    await admin.execute("CREATE TABLE other_data (secret TEXT); INSERT INTO other_data VALUES ('x')")
    await admin.close()

    bot_dsn = _as(postgres_dsn, bot_role)
    store = PostgresFeedbackStore(bot_dsn, tmp_path / "pending.jsonl", migrate=False, replay_interval=3600)
    await store.open()
    try:
        result = _result("remote work allowance?")
        await store.record_answer(result, "c1", "u1", "msteams")
        receipt = await store.record_feedback(result.id, "up", "c1", "u1", "msteams")
        assert receipt.outcome is FeedbackOutcome.STORED
        unattributed = await store.record_feedback("f" * 32, "down", "c1", "u1", "msteams")
        assert unattributed.outcome is FeedbackOutcome.UNKNOWN_ANSWER
        assert [r["reaction"] for r in await store.feedback_rows()] == ["up"]
        assert not store.pending_path.exists()
    finally:
        await store.close()

    bot = await asyncpg.connect(bot_dsn)
    try:
        assert await bot.fetchval("SELECT current_user") == bot_role
        for statement in (
            "CREATE TABLE mine (x INT)",
            "DROP TABLE answers",
            "ALTER TABLE answers ADD COLUMN x INT",
            "TRUNCATE answer_feedback",
            "SELECT * FROM other_data",
            "INSERT INTO schema_migrations (version, name) VALUES (99, 'x')",
            "CREATE SCHEMA mine",
        ):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await bot.execute(statement)
    finally:
        await bot.close()
    # Migrating again (the next release's job) keeps the role and its rights.
    assert await migrate_database(postgres_dsn, grant=bot_role) == ([], version)


async def test_a_bot_started_before_the_migration_keeps_its_ratings_until_the_schema_is_there(
    postgres_dsn: str, bot_role: str, tmp_path: Path
) -> None:
    admin = await asyncpg.connect(postgres_dsn)
    await admin.execute(f"CREATE ROLE {bot_role} LOGIN")
    await admin.close()
    store = PostgresFeedbackStore(
        _as(postgres_dsn, bot_role), tmp_path / "pending.jsonl", migrate=False, replay_interval=3600
    )
    await store.open()  # no schema yet: not an error at start
    try:
        result = _result("holidays?")
        await store.record_answer(result, "c1", "u1", "msteams")
        receipt = await store.record_feedback(result.id, "down", "c1", "u1", "msteams", comment="old")
        assert receipt.outcome is FeedbackOutcome.PENDING and store.pending_path.exists()

        await migrate_database(postgres_dsn, grant=bot_role)
        assert await store.replay_pending() == 2
        rows = await store.feedback_rows()
        assert [(r["result_id"], r["reaction"], r["comment"]) for r in rows] == [(result.id, "down", "old")]
        assert not store.pending_path.exists()
    finally:
        await store.close()


async def test_the_cli_grants_the_role_and_refuses_bad_names_clearly(
    postgres_dsn: str, bot_role: str
) -> None:
    bad = feedback_cli(postgres_dsn, "migrate", "--grant", "bot; DROP TABLE answers")
    assert bad.returncode == 2 and "lower-case letters" in bad.stderr and "Traceback" not in bad.stderr
    # A plain server has no Entra functions: an object id is refused, saying why.
    entra = feedback_cli(postgres_dsn, "migrate", "--grant", bot_role, "--object-id", str(uuid.uuid4()))
    assert entra.returncode == 2 and "no Entra authentication" in entra.stderr
    done = feedback_cli(postgres_dsn, "migrate", "--grant", bot_role)
    assert done.returncode == 0, done.stderr
    assert f"{bot_role} may read and write the feedback tables only" in done.stderr
    bot = await asyncpg.connect(_as(postgres_dsn, bot_role))
    try:
        assert await bot.fetchval("SELECT count(*) FROM answers") == 0
    finally:
        await bot.close()
