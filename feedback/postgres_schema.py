"""The PostgreSQL schema of the feedback store, as numbered migrations.

`schema_migrations` lists the versions applied. `migrate` applies the missing ones in order, all in
one transaction that first takes an advisory lock: several instances starting at once wait for the
first one, then find nothing left to do. It runs when a store opens and by `python -m feedback
migrate`.
A migration is never edited once released; a change of schema is a new, higher number.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import asyncpg

log = logging.getLogger(__name__)

# pg_advisory_xact_lock's key for "migrating the feedback schema" (any constant; bytes of "cragfb01").
ADVISORY_LOCK_KEY = 0x6372616766623031


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "answers and their ratings",
        """
        CREATE TABLE answers (
            result_id TEXT PRIMARY KEY,
            created_at TIMESTAMPTZ NOT NULL,
            conversation_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            channel_id TEXT NOT NULL,
            language TEXT NOT NULL,
            question TEXT NOT NULL,
            answer TEXT NOT NULL,
            branch TEXT NOT NULL,
            cited_files TEXT NOT NULL,
            web_urls TEXT NOT NULL
        );
        CREATE INDEX answers_by_conversation ON answers (conversation_id, created_at);
        CREATE TABLE answer_feedback (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            created_at TIMESTAMPTZ NOT NULL,
            updated_at TIMESTAMPTZ NOT NULL,
            result_id TEXT NOT NULL REFERENCES answers (result_id),
            reaction TEXT NOT NULL CHECK (reaction IN ('up', 'down')),
            comment TEXT NOT NULL DEFAULT '',
            source TEXT NOT NULL,
            question TEXT NOT NULL,
            answer TEXT NOT NULL,
            branch TEXT NOT NULL,
            cited_files TEXT NOT NULL,
            conversation_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            channel_id TEXT NOT NULL,
            UNIQUE (result_id, user_id)
        );
        """,
    ),
    Migration(
        2,
        "the message id and the card of an answer (Teams' native feedback, the thanks card)",
        """
        ALTER TABLE answers
            ADD COLUMN message_id TEXT NOT NULL DEFAULT '',
            ADD COLUMN card_json TEXT NOT NULL DEFAULT '';
        CREATE INDEX answers_by_message ON answers (conversation_id, message_id) WHERE message_id <> '';
        """,
    ),
    Migration(
        3,
        "what the admin dashboard reports: refusals, cache hits, stage timings, the web's outcome",
        """
        ALTER TABLE answers
            ADD COLUMN refused BOOLEAN NOT NULL DEFAULT false,
            ADD COLUMN cache_hit BOOLEAN NOT NULL DEFAULT false,
            ADD COLUMN timings_ms TEXT NOT NULL DEFAULT '',
            ADD COLUMN web_status TEXT NOT NULL DEFAULT '';
        CREATE INDEX answers_by_time ON answers (created_at);
        CREATE INDEX answer_feedback_by_time ON answer_feedback (updated_at);
        """,
    ),
    Migration(
        4,
        "turns the user stopped (Teams' Stop button), which the dashboard counts",
        """
        ALTER TABLE answers ADD COLUMN stopped BOOLEAN NOT NULL DEFAULT false;
        """,
    ),
    Migration(
        5,
        "every id an answer's message was sent under, and ratings that named no known answer",
        """
        CREATE TABLE answer_messages (
            conversation_id TEXT NOT NULL,
            message_id TEXT NOT NULL,
            result_id TEXT NOT NULL REFERENCES answers (result_id),
            kind TEXT NOT NULL,
            PRIMARY KEY (conversation_id, message_id)
        );
        INSERT INTO answer_messages (conversation_id, message_id, result_id, kind)
            SELECT conversation_id, message_id, result_id, 'sent' FROM answers WHERE message_id <> ''
            ON CONFLICT DO NOTHING;
        CREATE TABLE unattributed_feedback (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            created_at TIMESTAMPTZ NOT NULL,
            conversation_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            channel_id TEXT NOT NULL,
            reaction TEXT NOT NULL CHECK (reaction IN ('up', 'down')),
            comment TEXT NOT NULL DEFAULT '',
            source TEXT NOT NULL,
            named_id TEXT NOT NULL DEFAULT ''
        );
        CREATE INDEX unattributed_by_time ON unattributed_feedback (created_at);
        """,
    ),
)

LATEST = MIGRATIONS[-1].version

_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)
"""


async def migrate(conn: asyncpg.Connection, target: int | None = None) -> list[int]:
    """Apply the migrations not yet applied, up to `target` (default: all); returns their versions."""
    applied: list[int] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", ADVISORY_LOCK_KEY)
        await conn.execute(_TABLE)
        done = {row["version"] for row in await conn.fetch("SELECT version FROM schema_migrations")}
        unknown = sorted(v for v in done if v > LATEST)
        if unknown:
            log.warning("feedback schema has versions %s this code does not know (a newer release?)", unknown)
        for migration in MIGRATIONS:
            if migration.version in done or (target is not None and migration.version > target):
                continue
            await conn.execute(migration.sql)
            await conn.execute(
                "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                migration.version,
                migration.name,
            )
            applied.append(migration.version)
    if applied:
        log.info("feedback schema migrated to version %d (applied %s)", applied[-1], applied)
    return applied


async def schema_version(conn: asyncpg.Connection) -> int:
    """The highest version applied (0: none, or no schema_migrations table yet)."""
    exists = await conn.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL")
    if not exists:
        return 0
    version = await conn.fetchval("SELECT max(version) FROM schema_migrations")
    return int(version or 0)
