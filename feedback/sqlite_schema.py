"""The SQLite schema of the feedback store: made when a file opens, and completed in place for a
file an earlier version made (the SQLite side of feedback/postgres_schema.py's migrations).

The columns of `answers` and `answer_feedback` are the fields the stores write (ANSWER_FIELDS and
RATING_FIELDS, in that order), TEXT NOT NULL unless given a definition here: a field added there is
a column here, with no second list to keep in step.
"""

from __future__ import annotations

from collections.abc import Iterable

import aiosqlite

from feedback.protocol import ANSWER_FIELDS, RATING_FIELDS

# The definitions the tables share.
_ROW_ID = "INTEGER PRIMARY KEY AUTOINCREMENT"
_ANSWER_ID = "TEXT NOT NULL REFERENCES answers(result_id)"
_REACTION = "TEXT NOT NULL CHECK (reaction IN ('up', 'down'))"
_OPTIONAL_TEXT = "TEXT NOT NULL DEFAULT ''"
_FLAG = "INTEGER NOT NULL DEFAULT 0"

# Columns added to `answers` after its first release, in that order: a file made before one of them
# gets it at open (SQLite has no ADD COLUMN IF NOT EXISTS).
_ADDED_ANSWER_COLUMNS = {
    "message_id": _OPTIONAL_TEXT,
    "card_json": _OPTIONAL_TEXT,
    "refused": _FLAG,
    "cache_hit": _FLAG,
    "timings_ms": _OPTIONAL_TEXT,
    "web_status": _OPTIONAL_TEXT,
    "stopped": _FLAG,
}


def _text_columns(names: Iterable[str], **defined: str) -> dict[str, str]:
    return {name: defined.get(name, "TEXT NOT NULL") for name in names}


def _table(name: str, columns: dict[str, str], *constraints: str) -> str:
    lines = [f"{column} {definition}" for column, definition in columns.items()] + list(constraints)
    body = ",\n".join(f"    {line}" for line in lines)
    return f"CREATE TABLE IF NOT EXISTS {name} (\n{body}\n);\n"


_FIRST_ANSWER_COLUMNS = [f for f in ANSWER_FIELDS if f not in _ADDED_ANSWER_COLUMNS]
_ANSWERS = _table(
    "answers",
    {**_text_columns(_FIRST_ANSWER_COLUMNS, result_id="TEXT PRIMARY KEY"), **_ADDED_ANSWER_COLUMNS},
)

_RATING_COLUMNS = _text_columns(
    RATING_FIELDS, result_id=_ANSWER_ID, reaction=_REACTION, comment=_OPTIONAL_TEXT
)
_RATINGS = _table("answer_feedback", {"id": _ROW_ID, **_RATING_COLUMNS}, "UNIQUE (result_id, user_id)")

# Every id an answer's message was sent under (the id the channel returned, a stream's id): what a
# channel's feedback names. Unique within a conversation, so one id never names two answers.
_MESSAGES = _table(
    "answer_messages",
    _text_columns("conversation_id message_id result_id kind".split(), result_id=_ANSWER_ID),
    "PRIMARY KEY (conversation_id, message_id)",
)

# Ratings that named no answer the store knows: kept (they were acknowledged), never attached to
# another answer.
_UNATTRIBUTED_COLUMNS = _text_columns(
    "created_at conversation_id user_id channel_id reaction comment source named_id".split(),
    reaction=_REACTION,
    comment=_OPTIONAL_TEXT,
    named_id=_OPTIONAL_TEXT,
)
_UNATTRIBUTED = _table("unattributed_feedback", {"id": _ROW_ID, **_UNATTRIBUTED_COLUMNS})

_SCHEMA = _ANSWERS + _RATINGS + _MESSAGES + _UNATTRIBUTED

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


async def create_schema(db: aiosqlite.Connection) -> None:
    """The tables made if missing, a file an earlier version made completed with what it lacks."""
    await db.executescript(_SCHEMA)
    async with db.execute("PRAGMA table_info(answers)") as cur:
        columns = {row[1] for row in await cur.fetchall()}
    for column, definition in _ADDED_ANSWER_COLUMNS.items():
        if column not in columns:
            await db.execute(f"ALTER TABLE answers ADD COLUMN {column} {definition}")
    await db.executescript(_INDEXES)
    await db.execute(_COPY_MESSAGE_IDS)
