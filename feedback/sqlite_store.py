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
    FLAG_FIELDS,
    Feedback,
    FeedbackOutcome,
    FeedbackReceipt,
    Reaction,
    checked_answer_row,
    checked_rating,
    checked_unattributed,
)
from feedback.records import AnswerRecord, RatingRecord, UnattributedRecord
from feedback.sqlite_schema import create_schema
from feedback.statements import ALL_RATINGS, RATING_COLUMN_LIST, Statements
from hosting.sqlite_file import SqliteFile, open_connection

__all__ = ["FeedbackOutcome", "FeedbackReceipt", "FeedbackStore", "Reaction"]

log = logging.getLogger(__name__)


def _unavailable(exc: BaseException) -> bool:
    """SQLite refused the write (locked, disk trouble): keep it in the fallback file."""
    return isinstance(exc, sqlite3.Error)


_SQL = Statements(lambda n: "?")
# A second rating by the same user replaces the first, but an empty comment keeps the earlier one.
_RATE = (
    f"INSERT INTO answer_feedback ({RATING_COLUMN_LIST}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
    " ON CONFLICT (result_id, user_id) DO UPDATE SET reaction = excluded.reaction,"
    " updated_at = excluded.updated_at, source = excluded.source,"
    " comment = CASE WHEN excluded.comment != '' THEN excluded.comment ELSE comment END"
)
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


class FeedbackStore(SqliteFile, Feedback):
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
            await self.connect(create_schema, isolation_level=None)
            self._reader = await open_connection(self.path, self._busy_timeout_ms, readonly=True)
            self._queue = asyncio.Queue()
            self._writer = asyncio.create_task(self._write_loop(), name="feedback-writer")
            await self.replay_pending()
        except BaseException:
            await self.close()
            raise

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
        async with self.reader.execute(_SQL.answer_for_message, (conversation_id, message_id)) as cur:
            row = await cur.fetchone()
        return str(row[0]) if row else None

    async def stored_card(self, result_id: str) -> dict[str, Any] | None:
        async with self.reader.execute(_SQL.stored_card, (result_id,)) as cur:
            row = await cur.fetchone()
        if not row or not row[0]:
            return None
        card: dict[str, Any] = json.loads(row[0])
        return card

    async def feedback_rows(self) -> list[dict[str, Any]]:
        async with self.reader.execute(ALL_RATINGS) as cur:
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r, strict=True)) for r in await cur.fetchall()]

    async def answers_since(self, since: datetime, limit: int) -> list[AnswerRecord]:
        # Times are stored as UTC ISO 8601 text, which sorts as the times do.
        async with self.reader.execute(_SQL.answers_since, (_utc_text(since), limit)) as cur:
            names = [d[0] for d in cur.description]
            rows = await cur.fetchall()
        return [AnswerRecord.model_validate(dict(zip(names, r, strict=True))) for r in rows]

    async def ratings_since(self, since: datetime) -> list[RatingRecord]:
        async with self.reader.execute(_SQL.ratings_since, (_utc_text(since),)) as cur:
            names = [d[0] for d in cur.description]
            rows = await cur.fetchall()
        return [RatingRecord.model_validate(dict(zip(names, r, strict=True))) for r in rows]

    async def unattributed_since(self, since: datetime) -> list[UnattributedRecord]:
        async with self.reader.execute(_SQL.unattributed_since, (_utc_text(since),)) as cur:
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
                result = await self._record_feedback(payload)
            elif kind == "unattributed":
                result = await self._record_unattributed(payload)
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
        await self.db.execute(_SQL.insert_answer, values)

    async def _set_message_id(self, result_id: str, message_id: str, kind: str = "sent") -> None:
        # The conversation is the answer's own; an id already naming an answer there keeps naming it.
        await self.db.execute(
            "INSERT OR IGNORE INTO answer_messages (conversation_id, message_id, result_id, kind)"
            " SELECT conversation_id, ?, result_id, ? FROM answers WHERE result_id = ?",
            (message_id, kind, result_id),
        )
        if kind == "sent":
            await self.db.execute(_SQL.set_final_message_id, (message_id, result_id))

    async def _record_unattributed(self, args: dict[str, Any]) -> FeedbackReceipt:
        await self.db.execute(_SQL.insert_unattributed, checked_unattributed(args))
        return FeedbackReceipt(FeedbackOutcome.UNATTRIBUTED)

    async def _record_feedback(self, args: dict[str, Any]) -> FeedbackReceipt:
        rating = checked_rating(args)
        async with self.db.execute(_SQL.rated_answer, (rating.result_id, rating.conversation_id)) as cur:
            row = await cur.fetchone()
        if row is None:
            return FeedbackReceipt(FeedbackOutcome.UNKNOWN_ANSWER)
        *snapshot, language = row
        now = datetime.now(UTC).isoformat()
        async with self.db.execute(
            "SELECT 1 FROM answer_feedback WHERE result_id = ? AND user_id = ?",
            (rating.result_id, rating.user_id),
        ) as cur:
            existed = await cur.fetchone() is not None
        rated = (now, now, rating.result_id, rating.reaction, rating.comment, rating.source)
        await self.db.execute(_RATE, (*rated, *snapshot, *rating.who))
        outcome = FeedbackOutcome.UPDATED if existed else FeedbackOutcome.STORED
        return FeedbackReceipt(outcome, language)


def _utc_text(time: datetime) -> str:
    return time.astimezone(UTC).isoformat()
