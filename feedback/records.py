"""Answers and ratings as the stores read them back for reports (the admin dashboard): the same
records from SQLite and PostgreSQL, whatever each database's column types are.

The stores keep lists and maps as JSON text; they are parsed here, once, at the boundary. A value a
database cannot have produced (damaged JSON) is read as empty rather than failing the whole report.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, field_validator


def _json(value: Any, kind: type) -> Any:
    if isinstance(value, kind):
        return value
    if not isinstance(value, str) or not value:
        return kind()
    try:
        parsed = json.loads(value)
    except ValueError:
        return kind()
    return parsed if isinstance(parsed, kind) else kind()


def _utc(value: Any) -> Any:
    """SQLite gives ISO 8601 text, PostgreSQL aware datetimes: both become aware UTC datetimes."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return value


def _flag(value: Any) -> bool:
    # SQLite INTEGER 0/1, PostgreSQL BOOLEAN.
    return bool(value) and value not in ("0", "false")


def _strings(value: Any) -> list[str]:
    return [str(x) for x in _json(value, list)]


# The column types both records share: a time in UTC, and a JSON list of strings.
UtcTime = Annotated[datetime, BeforeValidator(_utc)]
JsonStrings = Annotated[list[str], BeforeValidator(_strings)]


class AnswerRecord(BaseModel):
    """One answer the bot gave (no conversation or user id: reports do not need who asked)."""

    result_id: str
    created_at: UtcTime
    channel_id: str
    language: str
    question: str
    answer: str
    branch: str
    cited_files: JsonStrings
    web_urls: JsonStrings
    refused: bool
    cache_hit: bool
    # Milliseconds per engine stage; None for answers stored before the stores kept them.
    timings_ms: dict[str, float] | None
    web_status: str
    stopped: bool  # the user stopped the turn (Teams' Stop): they saw no answer

    @field_validator("refused", "cache_hit", "stopped", mode="before")
    @classmethod
    def _bool(cls, value: Any) -> bool:
        return _flag(value)

    @field_validator("timings_ms", mode="before")
    @classmethod
    def _timings(cls, value: Any) -> dict[str, float] | None:
        if value in ("", None):
            return None
        parsed = _json(value, dict)
        return {str(k): float(v) for k, v in parsed.items() if isinstance(v, int | float)}


class RatingRecord(BaseModel):
    """One user's rating of an answer, with the answer as it was rated and its web sources."""

    updated_at: UtcTime
    result_id: str
    reaction: Literal["up", "down"]
    comment: str
    source: str
    question: str
    answer: str
    branch: str
    cited_files: JsonStrings
    web_urls: JsonStrings
    channel_id: str


class UnattributedRecord(BaseModel):
    """A rating that named no answer the store knows, kept apart (never attached to another answer)."""

    created_at: UtcTime
    reaction: Literal["up", "down"]
    comment: str
    source: str
    channel_id: str
    named_id: str  # the message or result id it named ("" for none)


ANSWER_COLUMNS = [name for name in AnswerRecord.model_fields]
RATING_COLUMNS = [name for name in RatingRecord.model_fields]
UNATTRIBUTED_COLUMNS = [name for name in UnattributedRecord.model_fields]
