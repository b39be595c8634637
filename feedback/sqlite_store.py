"""SQLite store of answers and their feedback.

Each answer is recorded when it is sent, so a rating needs only the answer's id: the card carries
no question or answer text that a tampered click could falsify, and a rating for an answer this
store never gave (or gave in another conversation) is refused.

One writer: every write goes through a queue to a single task that owns the write connection and
commits each item in its own transaction, so a failed write rolls back only itself. A caller is
answered only after its row was committed, or, when the database keeps refusing (locked by another
process, disk trouble), after the item was appended and fsynced to `<db>.pending.jsonl`, which is
replayed before the next write and at start (feedback/pending.py). Reads use a second, read-only
connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiosqlite

from feedback.pending import PendingFile, entry
from feedback.protocol import (
    ANSWER_FIELDS,
    FLAG_FIELDS,
    UNATTRIBUTED_FIELDS,
    FeedbackOutcome,
    FeedbackReceipt,
    Reaction,
    RecordsWrites,
    checked_answer_row,
    checked_unattributed,
)
from feedback.records import (
    ANSWER_COLUMNS,
    RATING_COLUMNS,
    UNATTRIBUTED_COLUMNS,
    AnswerRecord,
    RatingRecord,
    UnattributedRecord,
)
from hosting.sqlite_file import SqliteFile, open_connection

__all__ = ["FeedbackOutcome", "FeedbackReceipt", "FeedbackStore", "Reaction"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    result_id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    channel_id TEXT NOT NULL,
    language TEXT NOT NULL,
    question TEXT NOT NULL,
    answer TEXT NOT NULL,
    branch TEXT NOT NULL,
    cited_files TEXT NOT NULL,
    web_urls TEXT NOT NULL,
    message_id TEXT NOT NULL DEFAULT '',
    card_json TEXT NOT NULL DEFAULT '',
    refused INTEGER NOT NULL DEFAULT 0,
    cache_hit INTEGER NOT NULL DEFAULT 0,
    timings_ms TEXT NOT NULL DEFAULT '',
    web_status TEXT NOT NULL DEFAULT '',
    stopped INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS answer_feedback (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    result_id TEXT NOT NULL REFERENCES answers(result_id),
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
-- Every id an answer's message was sent under (the id the channel returned, a stream's id): what a
-- channel's feedback names. Unique within a conversation, so one id never names two answers.
CREATE TABLE IF NOT EXISTS answer_messages (
    conversation_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    result_id TEXT NOT NULL REFERENCES answers(result_id),
    kind TEXT NOT NULL,
    PRIMARY KEY (conversation_id, message_id)
);
-- Ratings that named no answer the store knows: kept (they were acknowledged), never attached to
-- another answer.
CREATE TABLE IF NOT EXISTS unattributed_feedback (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    channel_id TEXT NOT NULL,
    reaction TEXT NOT NULL CHECK (reaction IN ('up', 'down')),
    comment TEXT NOT NULL DEFAULT '',
    source TEXT NOT NULL,
    named_id TEXT NOT NULL DEFAULT ''
);
"""
# Columns added to `answers` after its first release, for files created before them (SQLite has no
# ADD COLUMN IF NOT EXISTS): the SQLite side of feedback/postgres_schema.py's migrations.
_ADDED_COLUMNS = {
    "message_id": "TEXT NOT NULL DEFAULT ''",
    "card_json": "TEXT NOT NULL DEFAULT ''",
    "refused": "INTEGER NOT NULL DEFAULT 0",
    "cache_hit": "INTEGER NOT NULL DEFAULT 0",
    "timings_ms": "TEXT NOT NULL DEFAULT ''",
    "web_status": "TEXT NOT NULL DEFAULT ''",
    "stopped": "INTEGER NOT NULL DEFAULT 0",
}
# Reports read a window of recent answers and ratings.
_INDEXES = """
CREATE INDEX IF NOT EXISTS answers_by_time ON answers (created_at);
CREATE INDEX IF NOT EXISTS answer_feedback_by_time ON answer_feedback (updated_at);
CREATE INDEX IF NOT EXISTS unattributed_by_time ON unattributed_feedback (created_at);
"""
# The one message id an answer row kept before answer_messages existed, copied once (idempotent).
_COPY_MESSAGE_IDS = """
INSERT OR IGNORE INTO answer_messages (conversation_id, message_id, result_id, kind)
SELECT conversation_id, message_id, result_id, 'sent' FROM answers WHERE message_id != ''
"""

log = logging.getLogger(__name__)


def _unavailable(exc: BaseException) -> bool:
    """SQLite refused the write (locked, disk trouble): keep it in the fallback file."""
    return isinstance(exc, sqlite3.Error)


# Every field but the id, as the new row has it.
_UPSERT = ", ".join(f"{f} = excluded.{f}" for f in ANSWER_FIELDS[1:])

_BATCH = 64  # items taken from the queue at once (each still committed on its own)


@dataclass
class _Job:
    kind: str  # answer, message_id, feedback or replay
    payload: Any
    future: asyncio.Future[Any] = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    def entry(self) -> dict[str, Any]:
        return entry(self.kind, self.payload)

    def resolve(self, value: Any) -> None:
        if not self.future.done():  # the caller may have been cancelled meanwhile
            self.future.set_result(value)

    def fail(self, exc: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(exc)


class FeedbackStore(SqliteFile, RecordsWrites):
    def __init__(self, path: Path, retries: int = 2) -> None:
        # A locked database is retried briefly, then the write goes to the fallback file: a user
        # must not wait seconds for a thumbs-up to be acknowledged.
        super().__init__(path, busy_timeout_ms=500)
        # Writes the database refused (locked, disk trouble) wait here, one JSON line each, until
        # the next successful write or start replays them: an acknowledged rating is never lost.
        self.pending_path = path.with_name(path.name + ".pending.jsonl")
        self.pending = PendingFile(self.pending_path, self.quarantined)
        self.replaying_path = self.pending.replaying_path
        self._retries = retries
        self._queue: asyncio.Queue[_Job | None] | None = None
        self._writer: asyncio.Task[None] | None = None
        self._reader: aiosqlite.Connection | None = None

    async def open(self) -> None:
        try:
            # Autocommit mode: the writer opens each transaction itself (BEGIN IMMEDIATE).
            await self.connect(self._create_schema, isolation_level=None)
            self._reader = await open_connection(self.path, self._busy_timeout_ms, readonly=True)
            self._queue = asyncio.Queue()
            self._writer = asyncio.create_task(self._write_loop(), name="feedback-writer")
            await self.replay_pending()
        except BaseException:
            await self.close()
            raise

    @staticmethod
    async def _create_schema(db: aiosqlite.Connection) -> None:
        await db.executescript(_SCHEMA)
        # Databases created before a column existed get it added (SQLite has no IF NOT EXISTS here).
        async with db.execute("PRAGMA table_info(answers)") as cur:
            columns = {row[1] for row in await cur.fetchall()}
        for column, definition in _ADDED_COLUMNS.items():
            if column not in columns:
                await db.execute(f"ALTER TABLE answers ADD COLUMN {column} {definition}")
        await db.executescript(_INDEXES)
        await db.execute(_COPY_MESSAGE_IDS)

    async def close(self) -> None:
        """Stop the writer after it finished every queued item, then close both connections."""
        if self._writer is not None and self._queue is not None:
            if not self._writer.done():
                await self._queue.put(None)
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(self._writer)
            self._writer = None
        if self._reader is not None:
            await self._reader.close()
            self._reader = None
        await super().close()

    @property
    def reader(self) -> aiosqlite.Connection:
        if self._reader is None:
            raise RuntimeError(f"{self.path.name} is not open")
        return self._reader

    async def _write(self, kind: str, payload: Any) -> Any:
        if self._queue is None or self._writer is None or self._writer.done():
            raise RuntimeError(f"{self.path.name} is not open")
        job = _Job(kind, payload)
        await self._queue.put(job)
        return await job.future

    # --- the public API -------------------------------------------------------------------------

    async def replay_pending(self) -> int:
        """Write what the fallback file holds (answers first, then ratings); returns rows written."""
        written: int = await self._write("replay", None)
        return written

    async def answer_for_message(self, conversation_id: str, message_id: str | None) -> str | None:
        if not message_id:
            return None
        async with self.reader.execute(
            "SELECT result_id FROM answer_messages WHERE conversation_id = ? AND message_id = ?",
            (conversation_id, message_id),
        ) as cur:
            row = await cur.fetchone()
        return str(row[0]) if row else None

    async def stored_card(self, result_id: str) -> dict[str, Any] | None:
        async with self.reader.execute(
            "SELECT card_json FROM answers WHERE result_id = ?", (result_id,)
        ) as cur:
            row = await cur.fetchone()
        if not row or not row[0]:
            return None
        card: dict[str, Any] = json.loads(row[0])
        return card

    async def feedback_rows(self) -> list[dict[str, Any]]:
        async with self.reader.execute("SELECT * FROM answer_feedback ORDER BY id") as cur:
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r, strict=True)) for r in await cur.fetchall()]

    async def answers_since(self, since: datetime, limit: int) -> list[AnswerRecord]:
        # Times are stored as UTC ISO 8601 text, which sorts as the times do.
        query = (
            f"SELECT {', '.join(ANSWER_COLUMNS)} FROM answers WHERE created_at >= ?"
            " ORDER BY created_at DESC LIMIT ?"
        )
        async with self.reader.execute(query, (since.astimezone(UTC).isoformat(), limit)) as cur:
            names = [d[0] for d in cur.description]
            rows = await cur.fetchall()
        return [AnswerRecord.model_validate(dict(zip(names, r, strict=True))) for r in rows]

    async def ratings_since(self, since: datetime) -> list[RatingRecord]:
        columns = ", ".join(f"f.{c}" for c in RATING_COLUMNS if c != "web_urls")
        query = (
            f"SELECT {columns}, COALESCE(a.web_urls, '[]') AS web_urls FROM answer_feedback f"
            " LEFT JOIN answers a ON a.result_id = f.result_id"
            " WHERE f.updated_at >= ? ORDER BY f.updated_at DESC, f.id DESC"
        )
        async with self.reader.execute(query, (since.astimezone(UTC).isoformat(),)) as cur:
            names = [d[0] for d in cur.description]
            rows = await cur.fetchall()
        return [RatingRecord.model_validate(dict(zip(names, r, strict=True))) for r in rows]

    async def unattributed_since(self, since: datetime) -> list[UnattributedRecord]:
        query = (
            f"SELECT {', '.join(UNATTRIBUTED_COLUMNS)} FROM unattributed_feedback WHERE created_at >= ?"
            " ORDER BY created_at DESC, id DESC"
        )
        async with self.reader.execute(query, (since.astimezone(UTC).isoformat(),)) as cur:
            names = [d[0] for d in cur.description]
            rows = await cur.fetchall()
        return [UnattributedRecord.model_validate(dict(zip(names, r, strict=True))) for r in rows]

    # --- the writer -----------------------------------------------------------------------------

    async def _write_loop(self) -> None:
        assert self._queue is not None
        stopping = False
        while not stopping:
            first = await self._queue.get()
            if first is None:
                break
            batch = [first]
            while len(batch) < _BATCH and not self._queue.empty():
                job = self._queue.get_nowait()
                if job is None:
                    stopping = True  # finish this batch, then stop: nothing queued is dropped
                    break
                batch.append(job)
            try:
                await self._write_batch(batch)
            except BaseException as exc:  # a bug must not leave callers waiting forever
                for job in batch:
                    job.fail(exc if isinstance(exc, Exception) else RuntimeError("feedback writer stopped"))
                if not isinstance(exc, Exception):
                    raise
                log.exception("feedback writer failed on a batch of %d", len(batch))

    async def _write_batch(self, batch: list[_Job]) -> None:
        # Writes refused earlier are replayed first, so writes keep their order. The database is "down"
        # for the rest of the batch once a write was refused after its retries: later items go straight
        # to the fallback file instead of each waiting out the retries.
        replayed = 0
        down = False
        if self.pending.exists():
            replayed = await self.pending.replay(self._transaction, _unavailable)
            down = self.pending.exists()
        kept: list[_Job] = []
        for job in batch:
            if job.kind == "replay":
                job.resolve(replayed)
                replayed = 0
                continue
            if down:
                kept.append(job)
                continue
            try:
                result = await self._with_retries(job.kind, job.payload)
            except sqlite3.Error:
                down = True
                kept.append(job)
                continue
            except Exception as exc:
                job.fail(exc)
                continue
            job.resolve(result)
        if kept:
            try:
                self.pending.keep([job.entry() for job in kept])
            except OSError as exc:  # neither the database nor the disk took it: no acknowledgement
                log.error("feedback fallback file %s not writable: %s", self.pending_path, exc)
                for job in kept:
                    job.fail(exc)
                return
            for job in kept:
                rating = job.kind in ("feedback", "unattributed")
                job.resolve(FeedbackReceipt(FeedbackOutcome.PENDING) if rating else None)

    async def _with_retries(self, kind: str, payload: Any) -> Any:
        """Write one item in its own transaction, retrying while SQLite is busy; raises the last
        sqlite3.Error when it still failed."""
        for attempt in range(self._retries + 1):
            try:
                return await self._transaction(kind, payload)
            except sqlite3.Error as exc:
                log.warning("feedback database write failed (%s), attempt %d", exc, attempt + 1)
                if attempt == self._retries:
                    raise
                await asyncio.sleep(0.05 * (2**attempt))
        raise AssertionError("unreachable")

    async def _transaction(self, kind: str, payload: Any) -> Any:
        db = self.db
        await db.execute("BEGIN IMMEDIATE")
        try:
            result: Any = None
            if kind == "answer":
                await self._insert_answer(payload)
            elif kind == "message_id":
                await self._set_message_id(**payload)
            elif kind == "feedback":
                result = await self._record_feedback(**payload)
            elif kind == "unattributed":
                result = await self._record_unattributed(**payload)
            else:
                raise ValueError(f"unknown kind of write: {kind!r}")
            await db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                await db.execute("ROLLBACK")
            raise
        return result

    async def _insert_answer(self, row: list[str]) -> None:
        values: list[Any] = checked_answer_row(row)
        for flag in FLAG_FIELDS:  # refused, cache_hit, stopped
            values[flag] = int(values[flag] == "1")
        # An upsert, not a replace: replaying an answer again keeps the message id set meanwhile.
        await self.db.execute(
            f"INSERT INTO answers ({', '.join(ANSWER_FIELDS)}) VALUES ({', '.join('?' * len(ANSWER_FIELDS))})"
            f" ON CONFLICT (result_id) DO UPDATE SET {_UPSERT}",
            values,
        )

    async def _set_message_id(self, result_id: str, message_id: str, kind: str = "sent") -> None:
        # The conversation is the answer's own; an id already naming an answer there keeps naming it.
        await self.db.execute(
            "INSERT OR IGNORE INTO answer_messages (conversation_id, message_id, result_id, kind)"
            " SELECT conversation_id, ?, result_id, ? FROM answers WHERE result_id = ?",
            (message_id, kind, result_id),
        )
        # The answer row's own column (what exports read) keeps the final message's id.
        if kind == "sent":
            await self.db.execute(
                "UPDATE answers SET message_id = ? WHERE result_id = ?", (message_id, result_id)
            )

    async def _record_unattributed(self, **args: Any) -> FeedbackReceipt:
        await self.db.execute(
            f"INSERT INTO unattributed_feedback ({', '.join(UNATTRIBUTED_FIELDS)})"
            f" VALUES ({', '.join('?' * len(UNATTRIBUTED_FIELDS))})",
            checked_unattributed(args),
        )
        return FeedbackReceipt(FeedbackOutcome.UNATTRIBUTED)

    async def _record_feedback(
        self,
        result_id: str,
        reaction: Reaction,
        conversation_id: str,
        user_id: str,
        channel_id: str,
        source: str = "card",
        comment: str = "",
    ) -> FeedbackReceipt:
        if reaction not in ("up", "down"):
            raise ValueError(f"reaction must be up or down, not {reaction!r}")
        async with self.db.execute(
            "SELECT question, answer, branch, cited_files, language FROM answers "
            "WHERE result_id = ? AND conversation_id = ?",
            (result_id, conversation_id),
        ) as cur:
            row = await cur.fetchone()
        if row is None:
            return FeedbackReceipt(FeedbackOutcome.UNKNOWN_ANSWER)
        *snapshot, language = row
        now = datetime.now(UTC).isoformat()
        async with self.db.execute(
            "SELECT 1 FROM answer_feedback WHERE result_id = ? AND user_id = ?", (result_id, user_id)
        ) as cur:
            existed = await cur.fetchone() is not None
        await self.db.execute(
            "INSERT INTO answer_feedback (created_at, updated_at, result_id, reaction, comment, source,"
            " question, answer, branch, cited_files, conversation_id, user_id, channel_id)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
            " ON CONFLICT (result_id, user_id) DO UPDATE SET reaction = excluded.reaction,"
            " updated_at = excluded.updated_at, source = excluded.source,"
            " comment = CASE WHEN excluded.comment != '' THEN excluded.comment ELSE comment END",
            (now, now, result_id, reaction, comment, source, *snapshot, conversation_id, user_id, channel_id),
        )
        outcome = FeedbackOutcome.UPDATED if existed else FeedbackOutcome.STORED
        return FeedbackReceipt(outcome, language)
