"""PostgreSQL store of answers and their feedback: what several instances of the bot share.

The same contract as the SQLite store (feedback/protocol.py). Every write is its own transaction on
a connection of an asyncpg pool, and a caller is answered only after the commit returned. When the
server cannot be reached (down, refusing connections, restarting, out of connection slots), the
write is retried briefly, then appended and fsynced to the local fallback file (feedback/pending.py)
and acknowledged as pending; that file is replayed before the next write once the server answers
again, and at start. After a refusal, writes go straight to the file for a moment instead of each
waiting for the server again. A background task also replays the file every few seconds, so it
drains when no new write comes. With several instances, an answer may wait in one instance's file
while its rating waits in another's: a rating whose answer is not in the database yet is held and
retried for an hour before it is dropped.

The schema is brought up to date when the store opens (feedback/postgres_schema.py). A server that
is down at start does not stop the bot: the schema is applied before the first write that gets
through. The DSN holds a password: it is never logged (log lines name host, port and database).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import asyncpg

from crag.outbound.entra_tokens import POSTGRES_SCOPE, TokenPassword
from feedback.pending import PendingFile, entry
from feedback.postgres_roles import check_role, ensure_role, grant_bot_role
from feedback.postgres_schema import LATEST, migrate, schema_version
from feedback.protocol import (
    FLAG_FIELDS,
    Feedback,
    FeedbackOutcome,
    FeedbackReceipt,
    FeedbackStoreError,
    checked_answer_row,
    checked_rating,
    checked_unattributed,
)
from feedback.records import AnswerRecord, RatingRecord, UnattributedRecord
from feedback.statements import ALL_RATINGS, RATING_COLUMN_LIST, Statements

log = logging.getLogger(__name__)

_PAUSE_AFTER_REFUSAL = 1.0  # seconds during which writes go straight to the fallback file


class FeedbackDatabaseError(FeedbackStoreError):
    """The server answered but refused the store (wrong password, no such database, no rights)."""


class SchemaNotReady(Exception):
    """The bot does not migrate (CRAG_POSTGRES_MIGRATE=false: its role may not) and the migration job has
    not brought the schema to the version this code writes yet. Like an unreachable server, it passes:
    writes wait in the fallback file until the job has run."""


def check_dsn(dsn: str) -> None:
    """A ValueError naming what is wrong with a DSN, without repeating it (it may hold a password)."""
    if not dsn:
        raise ValueError(
            "CRAG_FEEDBACK_STORE=postgres needs CRAG_POSTGRES_URL (postgresql://user:pw@host/db)"
        )
    try:
        parts = urlsplit(dsn)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise ValueError("CRAG_POSTGRES_URL is not a valid URL (postgresql://user:pw@host:port/db)") from None
    if parts.scheme not in ("postgres", "postgresql"):
        raise ValueError("CRAG_POSTGRES_URL must start with postgresql:// (or postgres://)")


def describe_dsn(dsn: str) -> str:
    """host:port/database, for log lines (no user, no password, no options)."""
    parts = urlsplit(dsn)
    host = parts.hostname or "localhost"
    return f"{host}:{parts.port or 5432}/{parts.path.lstrip('/') or '(default database)'}"


def unavailable(exc: BaseException) -> bool:
    """The server could not be reached or dropped the connection: the write may succeed later."""
    if isinstance(exc, SchemaNotReady):
        return True
    if isinstance(exc, asyncpg.InterfaceError):
        return "closed" in str(exc) or "closing" in str(exc)  # not a wrong call: a dropped connection
    return isinstance(
        exc,
        OSError
        | TimeoutError
        | asyncpg.PostgresConnectionError  # class 08: connection failure, rejected, does not exist
        | asyncpg.CannotConnectNowError  # starting up or shutting down
        | asyncpg.AdminShutdownError
        | asyncpg.CrashShutdownError
        | asyncpg.TooManyConnectionsError,
    )


def _text(value: str) -> str:
    return value.replace("\x00", "")  # PostgreSQL's text cannot hold NUL, SQLite's can


class PostgresFeedbackStore(Feedback):
    def __init__(
        self,
        dsn: str,
        pending_path: Path,
        *,
        pool_size: int = 10,
        retries: int = 2,
        connect_timeout: float = 5.0,
        command_timeout: float = 10.0,
        replay_interval: float = 10.0,
        hold_unknown: float = 3600.0,
        password: TokenPassword | None = None,
        migrate: bool = True,
    ) -> None:
        """password: called for each new connection (an Entra token, crag/outbound/entra_tokens.py),
        instead of
        a password in the DSN. migrate: apply missing migrations at open (False: only check the version,
        for a role that may not change the schema; feedback/postgres_roles.py)."""
        check_dsn(dsn)
        if password is not None and urlsplit(dsn).password:
            raise ValueError("CRAG_POSTGRES_AUTH=entra: the DSN must not hold a password (the token is one)")
        self._dsn = dsn
        self._password = password
        self._migrate = migrate
        self.where = describe_dsn(dsn)
        self.pending_path = pending_path
        self.quarantined: list[str] = []
        self.pending = PendingFile(pending_path, self.quarantined)
        self._pool_size = pool_size
        self._retries = retries
        self._connect_timeout = connect_timeout
        self._command_timeout = command_timeout
        self._pool: asyncpg.Pool | None = None
        self._schema_ready = False
        self._schema_lock = asyncio.Lock()
        self._replay_lock = asyncio.Lock()
        self._refused_until = 0.0
        self._replay_interval = replay_interval
        self._hold_unknown = hold_unknown
        self._replayer: asyncio.Task[None] | None = None

    def _describe(self, exc: BaseException) -> str:
        text = f"{type(exc).__name__}: {exc}"
        password = urlsplit(self._dsn).password
        for secret in (self._dsn, password, unquote(password or "")):
            if secret:
                text = text.replace(secret, "***")
        return text

    async def open(self) -> None:
        self._pool = await asyncpg.create_pool(
            self._dsn,
            **({"password": self._password} if self._password is not None else {}),
            min_size=0,
            max_size=self._pool_size,
            timeout=self._connect_timeout,
            command_timeout=self._command_timeout,
        )
        try:
            await self._ensure_schema()
        except Exception as exc:
            if not unavailable(exc):
                await self.close()
                raise FeedbackDatabaseError(
                    f"feedback database {self.where} refused the store: {self._describe(exc)}"
                ) from None
            log.error(
                "feedback database %s unreachable at start (%s): writes are kept in %s until it answers",
                self.where,
                self._describe(exc),
                self.pending_path,
            )
        else:
            if self.pending.exists() or self.pending.has_held():
                await self.replay_pending()
        self._replayer = asyncio.create_task(self._replay_loop(), name="feedback-replayer")

    async def close(self) -> None:
        replayer, self._replayer = self._replayer, None
        if replayer is not None:
            replayer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await replayer
        pool, self._pool = self._pool, None
        if self._password is not None:
            await self._password.close()  # its next call makes a new credential, should the store reopen
        if pool is None:
            return
        try:
            await asyncio.wait_for(pool.close(), timeout=self._command_timeout)
        except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            pool.terminate()

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise RuntimeError(f"feedback database {self.where} is not open")
        return self._pool

    async def _ensure_schema(self) -> None:
        if self._schema_ready:
            return
        async with self._schema_lock:
            if self._schema_ready:
                return
            async with self.pool.acquire() as conn:
                if self._migrate:
                    await migrate(conn)
                else:
                    version = await schema_version(conn)
                    if version < LATEST:
                        raise SchemaNotReady(
                            f"feedback schema at version {version}, this bot writes {LATEST}:"
                            " run the migration (python -m feedback migrate)"
                        )
            self._schema_ready = True

    # --- the public API -------------------------------------------------------------------------

    async def replay_pending(self) -> int:
        """Write what the fallback file holds (answers first, then ratings); returns rows written."""
        async with self._replay_lock:
            return await self._replay()

    async def answer_for_message(self, conversation_id: str, message_id: str | None) -> str | None:
        if not message_id:
            return None
        await self._ensure_schema()
        value = await self.pool.fetchval(_SQL.answer_for_message, _text(conversation_id), _text(message_id))
        return str(value) if value is not None else None

    async def stored_card(self, result_id: str) -> dict[str, Any] | None:
        await self._ensure_schema()
        text = await self.pool.fetchval(_SQL.stored_card, result_id)
        if not text:
            return None
        card: dict[str, Any] = json.loads(text)
        return card

    async def feedback_rows(self) -> list[dict[str, Any]]:
        await self._ensure_schema()
        return [as_row(r) for r in await self.pool.fetch(ALL_RATINGS)]

    async def answers_since(self, since: datetime, limit: int) -> list[AnswerRecord]:
        await self._ensure_schema()
        records = await self.pool.fetch(_SQL.answers_since, since, limit)
        return [AnswerRecord.model_validate(dict(r.items())) for r in records]

    async def ratings_since(self, since: datetime) -> list[RatingRecord]:
        await self._ensure_schema()
        records = await self.pool.fetch(_SQL.ratings_since, since)
        return [RatingRecord.model_validate(dict(r.items())) for r in records]

    async def unattributed_since(self, since: datetime) -> list[UnattributedRecord]:
        await self._ensure_schema()
        records = await self.pool.fetch(_SQL.unattributed_since, since)
        return [UnattributedRecord.model_validate(dict(r.items())) for r in records]

    # --- the writes -----------------------------------------------------------------------------

    async def _write(self, kind: str, payload: Any) -> Any:
        """Commit one write, or keep it in the fallback file when the server cannot be reached. Writes
        refused earlier go first: while they cannot be replayed, later ones join them in the file."""
        if self.pending.exists():
            async with self._replay_lock:
                if self.pending.exists() and time.monotonic() >= self._refused_until:
                    await self._replay()
                if self.pending.exists():
                    return self._keep(kind, payload)
        try:
            return await self._with_retries(kind, payload)
        except Exception as exc:
            if not unavailable(exc):
                raise
            self._refused(exc)
        return self._keep(kind, payload)

    def _refused(self, exc: BaseException) -> None:
        self._refused_until = time.monotonic() + _PAUSE_AFTER_REFUSAL
        log.warning("feedback database %s unavailable: %s", self.where, self._describe(exc))

    def _keep(self, kind: str, payload: Any) -> Any:
        # An OSError here (the disk refuses too) reaches the caller: nothing was acknowledged.
        self.pending.keep([entry(kind, payload)])
        rating = kind in ("feedback", "unattributed")
        return FeedbackReceipt(FeedbackOutcome.PENDING) if rating else None

    async def _replay(self) -> int:
        try:
            await self._ensure_schema()
        except Exception as exc:
            if not unavailable(exc):
                raise
            self._refused(exc)
            return 0
        written = await self.pending.replay(self._transaction, unavailable, self._hold_unknown)
        if self.pending.exists():
            self._refused_until = time.monotonic() + _PAUSE_AFTER_REFUSAL
        return written

    async def _replay_loop(self) -> None:
        """Replay what waits in the fallback file when no write comes to do it (a quiet instance whose
        kept answers other instances' ratings need)."""
        while True:
            await asyncio.sleep(self._replay_interval)
            if not (self.pending.exists() or self.pending.has_held()):
                continue
            if time.monotonic() < self._refused_until:
                continue
            try:
                async with self._replay_lock:
                    await self._replay()
            except Exception:  # a bug must not end the loop: the file is still there for the next try
                log.exception("replaying %s failed", self.pending_path.name)

    async def _with_retries(self, kind: str, payload: Any) -> Any:
        for attempt in range(self._retries + 1):
            try:
                return await self._transaction(kind, payload)
            except Exception as exc:
                if not unavailable(exc) or attempt == self._retries:
                    raise
                # A connection the server closed (a restart) is replaced by the pool on the next try.
                await asyncio.sleep(0.05 * (2**attempt))
        raise AssertionError("unreachable")

    async def _transaction(self, kind: str, payload: Any) -> Any:
        await self._ensure_schema()
        async with self.pool.acquire() as conn, conn.transaction():
            if kind == "answer":
                await _insert_answer(conn, payload)
                return None
            if kind == "message_id":
                await _set_message_id(conn, **payload)
                return None
            if kind == "feedback":
                return await _record_feedback(conn, payload)
            if kind == "unattributed":
                return await _record_unattributed(conn, payload)
            raise ValueError(f"unknown kind of write: {kind!r}")


def as_row(record: asyncpg.Record) -> dict[str, Any]:
    """A rating as the SQLite store gives it: times as ISO 8601 text."""
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in record.items()}


_SQL = Statements(lambda n: f"${n}")
# A second rating by the same user replaces the first, but an empty comment keeps the earlier one.
# xmax is 0 on a row this statement inserted, the updating transaction's id on one it updated.
_RATE = (
    f"INSERT INTO answer_feedback ({RATING_COLUMN_LIST})"
    " VALUES ($1, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
    " ON CONFLICT (result_id, user_id) DO UPDATE SET reaction = excluded.reaction,"
    " updated_at = excluded.updated_at, source = excluded.source,"
    " comment = CASE WHEN excluded.comment <> '' THEN excluded.comment ELSE answer_feedback.comment END"
    " RETURNING xmax = 0"
)


async def _insert_answer(conn: asyncpg.Connection, row: list[str]) -> None:
    checked = checked_answer_row(row)
    values: list[Any] = [_text(x) for x in checked]
    values[1] = datetime.fromisoformat(checked[1])
    for flag in FLAG_FIELDS:  # refused, cache_hit, stopped
        values[flag] = checked[flag] == "1"
    await conn.execute(_SQL.insert_answer, *values)


async def _set_message_id(
    conn: asyncpg.Connection, result_id: str, message_id: str, kind: str = "sent"
) -> None:
    # The conversation is the answer's own; an id already naming an answer there keeps naming it.
    await conn.execute(
        "INSERT INTO answer_messages (conversation_id, message_id, result_id, kind)"
        " SELECT conversation_id, $1, result_id, $2 FROM answers WHERE result_id = $3"
        " ON CONFLICT DO NOTHING",
        _text(message_id),
        _text(kind),
        _text(result_id),
    )
    if kind == "sent":
        await conn.execute(_SQL.set_final_message_id, _text(message_id), _text(result_id))


async def _record_unattributed(conn: asyncpg.Connection, args: dict[str, Any]) -> FeedbackReceipt:
    values: list[Any] = [_text(v) for v in checked_unattributed(args)]
    values[0] = datetime.fromisoformat(values[0])  # created_at
    await conn.execute(_SQL.insert_unattributed, *values)
    return FeedbackReceipt(FeedbackOutcome.UNATTRIBUTED)


async def _record_feedback(conn: asyncpg.Connection, args: dict[str, Any]) -> FeedbackReceipt:
    rating = checked_rating(args)
    answer = await conn.fetchrow(_SQL.rated_answer, _text(rating.result_id), _text(rating.conversation_id))
    if answer is None:
        return FeedbackReceipt(FeedbackOutcome.UNKNOWN_ANSWER)
    rated = [_text(v) for v in (rating.result_id, rating.reaction, rating.comment, rating.source)]
    snapshot = (answer["question"], answer["answer"], answer["branch"], answer["cited_files"])
    inserted = await conn.fetchval(_RATE, datetime.now(UTC), *rated, *snapshot, *map(_text, rating.who))
    outcome = FeedbackOutcome.STORED if inserted else FeedbackOutcome.UPDATED
    return FeedbackReceipt(outcome, str(answer["language"]))


# --- for `python -m feedback` -------------------------------------------------------------------


async def connect(dsn: str, timeout: float = 10.0, entra: bool = False) -> asyncpg.Connection:
    """entra: log in with the identity's token as the password (CRAG_POSTGRES_AUTH=entra)."""
    check_dsn(dsn)
    if not entra:
        return await asyncpg.connect(dsn, timeout=timeout)
    password = TokenPassword(POSTGRES_SCOPE)
    try:
        return await asyncpg.connect(dsn, timeout=timeout, password=await password())
    finally:
        await password.close()


async def read_rows(
    dsn: str, columns: list[str], entra: bool = False, table: str = "answer_feedback"
) -> list[dict[str, Any]]:
    """Every row of a feedback table, oldest first (schema_version 0, i.e. never migrated: an error)."""
    query = f"SELECT {', '.join(columns)} FROM {table} ORDER BY id"
    return await fetch_rows(dsn, query, entra=entra)


async def read_unattributed(dsn: str, columns: list[str], entra: bool = False) -> list[dict[str, Any]]:
    """The ratings kept apart, oldest first; none in a database migrated before they were kept
    (migration 5 made their table)."""
    try:
        return await read_rows(dsn, columns, entra, "unattributed_feedback")
    except asyncpg.UndefinedTableError:
        return []


async def fetch_rows(dsn: str, query: str, *args: object, entra: bool = False) -> list[dict[str, Any]]:
    """The rows of a read-only query over the feedback tables (schema_version 0: none to read)."""
    conn = await connect(dsn, entra=entra)
    try:
        if await schema_version(conn) == 0:
            raise FileNotFoundError(
                f"no feedback schema in {describe_dsn(dsn)} (run: python -m feedback migrate)"
            )
        return [as_row(r) for r in await conn.fetch(query, *args)]
    finally:
        await conn.close()


async def migrate_database(
    dsn: str, entra: bool = False, grant: str = "", object_id: str = ""
) -> tuple[list[int], int]:
    """Apply the missing migrations and, with grant, make the bot's role and give it its rights;
    returns the migrations applied and the version reached."""
    if grant:
        check_role(grant)  # before connecting: a bad name is the caller's mistake, not the server's
    conn = await connect(dsn, entra=entra)
    try:
        applied = await migrate(conn)
        if grant:
            await ensure_role(conn, grant, object_id)
            await grant_bot_role(conn, grant)
        return applied, await schema_version(conn)
    finally:
        await conn.close()
