"""What the bot and the turn use of a feedback store, whichever database holds it.

Two stores keep this contract: SQLite (feedback/sqlite_store.py, one file, the zero-setup default) and
PostgreSQL (postgres_store.py, shared by several instances). Both derive from `Feedback`, which turns
the contract's writes into the rows they record, once for both; each store supplies the reads and
`_write`. bot/bot_runtime.py picks one from the settings; nothing else knows which it is.

The guarantees both give: a caller is answered only after its row was committed, or, when the
database cannot take it, after it was appended and fsynced to the local fallback file
(feedback/pending.py) that is replayed later; a rating is one row per (answer, user), a second rating
by the same user updates it; a rating of an answer the store never gave (or gave in another
conversation) is refused by `record_feedback`.

A rating is attached only to the answer it names: by the answer's result id (the card's buttons), or
by one of the ids its message was sent under (`set_message_id`: the id the channel returned for the
final message, the stream id of a streamed one), which `answer_for_message` looks up exactly. A rating
that names no known answer is kept apart (`record_unattributed`), never attached to another answer: a
rating on the wrong answer corrupts the thumbs-down list and the evaluation sets made from it, silently.
"""

from __future__ import annotations

import json
import uuid
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from crag.core.models import CragResult
from feedback.records import AnswerRecord, RatingRecord, UnattributedRecord

Reaction = Literal["up", "down"]
# Which id of an answer's message a channel may name in a rating: the id it returned when the final
# message was sent, or the stream id (Teams' streaminfo) of a streamed answer.
MessageIdKind = Literal["sent", "stream"]
MESSAGE_ID_KINDS: tuple[MessageIdKind, ...] = ("sent", "stream")


class FeedbackOutcome(StrEnum):
    STORED = "stored"
    UPDATED = "updated"  # the same user changed or repeated their rating
    UNKNOWN_ANSWER = "unknown_answer"
    PENDING = "pending"  # the database was busy or down: kept in the fallback file, written later
    UNATTRIBUTED = "unattributed"  # kept apart: it named no answer the store knows


@dataclass(frozen=True)
class FeedbackReceipt:
    outcome: FeedbackOutcome
    language: str = ""  # the rated answer's language, to acknowledge in kind


class FeedbackStoreError(RuntimeError):
    """The database answered but refused the store at start (no such database, wrong password, no
    rights): a setting to fix, said as such, not a database that is down for a while."""


class Feedback(ABC):
    """A feedback store: every answer given and every rating received. The writes are made here, as
    the rows both stores record; a store supplies `_write(kind, payload)`, which returns once the row
    is committed or kept in the fallback file, and the reads."""

    pending_path: Path  # the fallback file of writes the database refused
    quarantined: list[str]  # damaged files moved aside since the store was created

    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def _write(self, kind: str, payload: Any) -> Any: ...

    async def record_answer(
        self,
        result: CragResult,
        conversation_id: str,
        user_id: str,
        channel_id: str,
        card: dict[str, Any] | None = None,
        stopped: bool = False,
    ) -> None:
        """The answer given (or, stopped: computed, then stopped by the user before they saw it; the
        same result id again updates the row it wrote)."""
        row = answer_row(result, conversation_id, user_id, channel_id, card, stopped)
        await self._write("answer", row)

    async def record_stopped(
        self, question: str, language: str, conversation_id: str, user_id: str, channel_id: str
    ) -> None:
        """A turn the user stopped (Teams' Stop button) before any answer was written."""
        await self._write("answer", stopped_row(question, language, conversation_id, user_id, channel_id))

    async def set_message_id(self, result_id: str, message_id: str, kind: MessageIdKind = "sent") -> None:
        """An id the answer's message was sent under: Teams' native feedback names it (replyToId)."""
        if kind not in MESSAGE_ID_KINDS:
            raise ValueError(f"unknown kind of message id: {kind!r}")
        await self._write("message_id", {"result_id": result_id, "message_id": message_id, "kind": kind})

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
        """A user's rating of the answer result_id; UNKNOWN_ANSWER when this store never gave it in
        this conversation."""
        rating = RatingArgs(result_id, reaction, conversation_id, user_id, channel_id, source, comment)
        receipt: FeedbackReceipt = await self._write("feedback", asdict(rating))
        return receipt

    async def record_unattributed(
        self,
        reaction: Reaction,
        conversation_id: str,
        user_id: str,
        channel_id: str,
        source: str,
        *,
        comment: str = "",
        named_id: str = "",  # the message or result id the rating named ("" for none)
    ) -> FeedbackReceipt:
        """A rating that names no answer this store knows, kept apart. comment and named_id are named
        at the call: both are optional text, easily swapped by position."""
        check_reaction(reaction)
        when = datetime.now(UTC).isoformat()  # when it was given, even if written later
        args = unattributed(when, reaction, conversation_id, user_id, channel_id, source, comment, named_id)
        receipt: FeedbackReceipt = await self._write("unattributed", args)
        return receipt

    @abstractmethod
    async def replay_pending(self) -> int:
        """Write what the fallback file holds (answers first, then ratings); returns rows written."""

    @abstractmethod
    async def answer_for_message(self, conversation_id: str, message_id: str | None) -> str | None:
        """The result id of the answer sent in this conversation under message_id; None for no id or
        an id no answer was sent under (never a guess such as the latest answer)."""

    @abstractmethod
    async def stored_card(self, result_id: str) -> dict[str, Any] | None: ...

    @abstractmethod
    async def feedback_rows(self) -> list[dict[str, Any]]: ...

    @abstractmethod
    async def answers_since(self, since: datetime, limit: int) -> list[AnswerRecord]:
        """Answers given at or after `since`, newest first, at most `limit` of them."""

    @abstractmethod
    async def ratings_since(self, since: datetime) -> list[RatingRecord]:
        """Ratings made or changed at or after `since`, newest first, with the rated answer's web
        sources."""

    @abstractmethod
    async def unattributed_since(self, since: datetime) -> list[UnattributedRecord]:
        """Ratings kept apart at or after `since` (they named no known answer), newest first."""


# The text fields of an answer row, in order. The first 12 are those of rows written before the
# dashboard's columns existed: the fallback file may still hold such rows, replayed with defaults.
ANSWER_FIELDS = (
    "result_id",
    "created_at",
    "conversation_id",
    "user_id",
    "channel_id",
    "language",
    "question",
    "answer",
    "branch",
    "cited_files",
    "web_urls",
    "card_json",
    "refused",  # "1" / "0": the engine's fixed "cannot answer" text was returned
    "cache_hit",  # "1" / "0": served from the answer cache
    "timings_ms",  # JSON {stage: ms} (CragResult.timings_ms); "" for rows that predate it
    "web_status",  # WebStatus: not_needed, off, ok, failed
    "stopped",  # "1" / "0": the user stopped the turn (Teams' Stop) and never saw this answer
)
# The fields both stores keep as flags ("1" / "0" in a row; 0/1 in SQLite, booleans in PostgreSQL).
FLAG_FIELDS = tuple(ANSWER_FIELDS.index(f) for f in ("refused", "cache_hit", "stopped"))
# The defaults of the fields added since the first release, in order: the fallback file may still
# hold rows an earlier version wrote (12 fields, then 16), replayed with these.
_ADDED_FIELD_DEFAULTS = ["0", "0", "", "", "0"]
_EARLIER_LENGTHS = (12, 16)


def answer_row(
    result: CragResult, conversation_id: str, user_id: str, channel_id: str, card: Any, stopped: bool = False
) -> list[str]:
    """An answer as the text fields both stores write (and the fallback file keeps): ANSWER_FIELDS."""
    return [
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
        "1" if result.refused else "0",
        "1" if result.cache_hit else "0",
        json.dumps(result.timings_ms),
        result.web.status.value,
        "1" if stopped else "0",
    ]


def stopped_row(
    question: str, language: str, conversation_id: str, user_id: str, channel_id: str
) -> list[str]:
    """A turn stopped before it had an answer: no answer, no branch, no sources, no timings."""
    fields = dict.fromkeys(ANSWER_FIELDS, "")
    fields.update(
        result_id=uuid.uuid4().hex,
        created_at=datetime.now(UTC).isoformat(),
        conversation_id=conversation_id,
        user_id=user_id,
        channel_id=channel_id,
        language=language,
        question=question,
        cited_files="[]",
        web_urls="[]",
        refused="0",
        cache_hit="0",
        stopped="1",
    )
    return list(fields.values())


def checked_answer_row(row: Any) -> list[str]:
    """A row to insert: every field text, an older 12-field row (kept in the fallback file by an
    earlier version) completed with the defaults of the fields added since."""
    if not isinstance(row, list) or not all(isinstance(x, str) for x in row):
        raise ValueError("an answer row is a list of text fields")
    fields: list[str] = list(row)
    if len(row) in _EARLIER_LENGTHS:
        fields += _ADDED_FIELD_DEFAULTS[len(row) - len(ANSWER_FIELDS) :]
    if len(fields) != len(ANSWER_FIELDS):
        earlier = " or ".join(str(n) for n in _EARLIER_LENGTHS)
        raise ValueError(f"an answer row has {len(ANSWER_FIELDS)} text fields (or {earlier})")
    return fields


def check_reaction(reaction: object) -> None:
    if reaction not in ("up", "down"):
        raise ValueError(f"reaction must be up or down, not {reaction!r}")


# The columns of a rating row, in the order both stores write them.
RATING_FIELDS = (
    *("created_at", "updated_at", "result_id", "reaction", "comment", "source"),  # the rating
    *("question", "answer", "branch", "cited_files"),  # the answer as it was when rated
    *("conversation_id", "user_id", "channel_id"),  # who rated, where
)


@dataclass(frozen=True)
class RatingArgs:
    """A rating of an answer as the writer takes it; the fallback file keeps it as a JSON object of
    these fields (lines an earlier version kept may lack source and comment: their defaults)."""

    result_id: str
    reaction: Reaction
    conversation_id: str
    user_id: str
    channel_id: str
    source: str = "card"
    comment: str = ""

    @property
    def who(self) -> tuple[str, str, str]:
        """Who rated, where: in the order both rating tables keep them."""
        return self.conversation_id, self.user_id, self.channel_id


def checked_rating(args: dict[str, Any]) -> RatingArgs:
    """A rating to write: a TypeError for missing or unknown fields, a ValueError for a reaction other
    than up or down (a damaged fallback-file line is quarantined, not written)."""
    rating = RatingArgs(**args)
    check_reaction(rating.reaction)
    return rating


# The fields of an unattributed rating, in the order both stores write them.
UNATTRIBUTED_FIELDS = (
    "created_at",
    "reaction",
    "conversation_id",
    "user_id",
    "channel_id",
    "source",
    "comment",
    "named_id",
)


def checked_unattributed(args: dict[str, Any]) -> list[str]:
    """An unattributed rating's values in UNATTRIBUTED_FIELDS order; a ValueError for wrong fields
    (a damaged fallback-file line is quarantined, not written)."""
    if sorted(args) != sorted(UNATTRIBUTED_FIELDS) or not all(isinstance(v, str) for v in args.values()):
        raise ValueError(f"an unattributed rating has the text fields {', '.join(UNATTRIBUTED_FIELDS)}")
    check_reaction(args["reaction"])
    datetime.fromisoformat(args["created_at"])  # a ValueError when it is not a time
    return [args[f] for f in UNATTRIBUTED_FIELDS]


def unattributed(*values: str) -> dict[str, str]:
    """An unattributed rating as the writer takes it (and the fallback file keeps it): its values in
    UNATTRIBUTED_FIELDS order, by name."""
    return dict(zip(UNATTRIBUTED_FIELDS, values, strict=True))


def unattributed_from_feedback(args: dict[str, Any], created_at: str) -> dict[str, Any]:
    """A rating kept for an answer the database never got, as the unattributed rating it becomes
    (the result id it named kept)."""
    rating = RatingArgs(**args)
    return unattributed(
        created_at, rating.reaction, *rating.who, rating.source, rating.comment, rating.result_id
    )
