"""SQLite store of answers and their feedback.

Each answer is recorded when it is sent, so a rating needs only the answer's id: the card carries
no question or answer text that a tampered click could falsify, and a rating for an answer this
store never gave (or gave in another conversation) is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import aiosqlite

from crag.models import CragResult
from crag.sqlite_file import SqliteFile

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
    card_json TEXT NOT NULL DEFAULT ''
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
"""

log = logging.getLogger(__name__)

Reaction = Literal["up", "down"]


class FeedbackOutcome(StrEnum):
    STORED = "stored"
    UPDATED = "updated"  # the same user changed or repeated their rating
    UNKNOWN_ANSWER = "unknown_answer"
    PENDING = "pending"  # the database was busy: kept in the fallback file, written later


@dataclass(frozen=True)
class FeedbackReceipt:
    outcome: FeedbackOutcome
    language: str = ""  # the rated answer's language, to acknowledge in kind


class FeedbackStore(SqliteFile):
    def __init__(self, path: Path, retries: int = 2) -> None:
        # A locked database is retried briefly, then the write goes to the fallback file: a user
        # must not wait seconds for a thumbs-up to be acknowledged.
        super().__init__(path, busy_timeout_ms=500)
        # Writes the database refused (locked, disk trouble) wait here, one JSON line each, until
        # the next successful write or start replays them: an acknowledged rating is never lost.
        self.pending_path = path.with_name(path.name + ".pending.jsonl")
        self._retries = retries
        self._replay_lock = asyncio.Lock()

    async def open(self) -> None:
        await self.connect()
        assert self._db is not None
        await self._db.executescript(_SCHEMA)
        # Databases created before a column existed get it added (SQLite has no IF NOT EXISTS here).
        async with self._db.execute("PRAGMA table_info(answers)") as cur:
            columns = {row[1] for row in await cur.fetchall()}
        for column in ("message_id", "card_json"):
            if column not in columns:
                await self._db.execute(f"ALTER TABLE answers ADD COLUMN {column} TEXT NOT NULL DEFAULT ''")
        await self._db.commit()
        await self.replay_pending()

    async def record_answer(
        self,
        result: CragResult,
        conversation_id: str,
        user_id: str,
        channel_id: str,
        card: dict[str, Any] | None = None,
    ) -> None:
        row = [
            result.id,
            result.created_at.isoformat(),
            conversation_id,
            user_id,
            channel_id,
            result.language,
            result.question,
            result.answer,
            result.branch.value,
            json.dumps(result.cited_files, ensure_ascii=False),
            json.dumps(result.web_urls, ensure_ascii=False),
            json.dumps(card, ensure_ascii=False) if card else "",
        ]
        if not await self._with_retries(lambda: self._insert_answer(row)):
            self._keep_pending({"kind": "answer", "row": row})
        else:
            await self.replay_pending()

    async def _insert_answer(self, row: list[str]) -> None:
        await self.db.execute(
            "INSERT OR REPLACE INTO answers (result_id, created_at, conversation_id, user_id, channel_id,"
            " language, question, answer, branch, cited_files, web_urls, card_json)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            row,
        )
        await self.db.commit()

    async def set_message_id(self, result_id: str, message_id: str) -> None:
        """The id the channel gave the answer message: Teams' native feedback refers to it."""
        await self.db.execute(
            "UPDATE answers SET message_id = ? WHERE result_id = ?", (message_id, result_id)
        )
        await self.db.commit()

    async def answer_for_message(self, conversation_id: str, message_id: str | None) -> str | None:
        """The result id of the answer sent as message_id, or (when a client omits the id) the
        conversation's latest answer."""
        query = "SELECT result_id FROM answers WHERE conversation_id = ?"
        args: tuple[str, ...] = (conversation_id,)
        if message_id:
            query, args = query + " AND message_id = ?", (conversation_id, message_id)
        else:
            query += " ORDER BY created_at DESC LIMIT 1"
        async with self.db.execute(query, args) as cur:
            row = await cur.fetchone()
        return str(row[0]) if row else None

    async def stored_card(self, result_id: str) -> dict[str, Any] | None:
        async with self.db.execute("SELECT card_json FROM answers WHERE result_id = ?", (result_id,)) as cur:
            row = await cur.fetchone()
        if not row or not row[0]:
            return None
        card: dict[str, Any] = json.loads(row[0])
        return card

    async def record_feedback(
        self,
        result_id: str,
        reaction: Reaction,
        conversation_id: str,
        user_id: str,
        channel_id: str,
        source: str = "card",
        comment: str = "",
    ) -> FeedbackReceipt:
        args: dict[str, Any] = {
            "result_id": result_id,
            "reaction": reaction,
            "conversation_id": conversation_id,
            "user_id": user_id,
            "channel_id": channel_id,
            "source": source,
            "comment": comment,
        }
        receipts: list[FeedbackReceipt] = []

        async def attempt() -> None:
            receipts.append(await self._record_feedback(**args))

        if await self._with_retries(attempt):
            await self.replay_pending()
            return receipts[-1]
        self._keep_pending({"kind": "feedback", "args": args})
        return FeedbackReceipt(FeedbackOutcome.PENDING)

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
        await self.db.commit()
        outcome = FeedbackOutcome.UPDATED if existed else FeedbackOutcome.STORED
        return FeedbackReceipt(outcome, language)

    async def _with_retries(self, write: Callable[[], Awaitable[None]]) -> bool:
        """Run a write, retrying while SQLite is busy; False when it still failed."""
        for attempt in range(self._retries + 1):
            try:
                await write()
                return True
            except sqlite3.Error as exc:
                log.warning("feedback database write failed (%s), attempt %d", exc, attempt + 1)
                with contextlib.suppress(sqlite3.Error):
                    await self.db.rollback()
                await asyncio.sleep(0.1 * (2**attempt))
        return False

    def _keep_pending(self, entry: dict[str, Any]) -> None:
        entry["kept_at"] = datetime.now(UTC).isoformat()
        line = json.dumps(entry, ensure_ascii=False) + "\n"
        with self.pending_path.open("a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        log.warning("feedback database unavailable: kept a %s in %s", entry["kind"], self.pending_path.name)

    async def replay_pending(self) -> int:
        """Write what the fallback file holds (answers first, then ratings); returns rows written."""
        if not self.pending_path.exists():
            return 0
        async with self._replay_lock:
            replaying = self.pending_path.with_suffix(".replaying")
            if not replaying.exists():
                if not self.pending_path.exists():
                    return 0
                self.pending_path.rename(replaying)
            entries = [json.loads(line) for line in replaying.read_text("utf-8").splitlines() if line.strip()]
            entries.sort(key=lambda e: e.get("kind") != "answer")
            written = 0
            for entry in entries:
                try:
                    if entry["kind"] == "answer":
                        await self._insert_answer(entry["row"])
                    else:
                        receipt = await self._record_feedback(**entry["args"])
                        if receipt.outcome is FeedbackOutcome.UNKNOWN_ANSWER:
                            log.warning(
                                "pending rating for unknown answer %s dropped", entry["args"]["result_id"]
                            )
                            continue
                    written += 1
                except sqlite3.Error:
                    with contextlib.suppress(sqlite3.Error):
                        await self.db.rollback()
                    self._keep_pending(entry)
            replaying.unlink()
        if written:
            log.info("replayed %d pending feedback writes", written)
        return written

    async def feedback_rows(self) -> list[dict[str, Any]]:
        self.db.row_factory = aiosqlite.Row
        try:
            async with self.db.execute("SELECT * FROM answer_feedback ORDER BY id") as cur:
                return [dict(r) for r in await cur.fetchall()]
        finally:
            self.db.row_factory = None
