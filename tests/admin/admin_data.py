"""A known set of answers and ratings for the admin dashboard's tests, written through a real feedback
store (SQLite or PostgreSQL), with the figures the dashboard must compute from it.

Ratings are stamped with the time they are made; to spread them over days as a week of use would,
`backdate` moves a rating's time in the database afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Literal

from crag.core.models import Branch, Citation, CragResult, WebOutcome, WebStatus
from feedback.protocol import Feedback

SCRIPT_QUESTION = "<script>document.title='pwned'</script>社員食堂のメニューは？"
SCRIPT_COMMENT = "<img src=x onerror=\"document.title='pwned'\">料金が違います"


@dataclass(frozen=True)
class Planned:
    key: str
    days_ago: float
    question: str
    branch: Branch
    language: str = "en"
    refused: bool = False
    cache_hit: bool = False
    timings: dict[str, float] | None = None
    files: tuple[str, ...] = ()
    web: tuple[str, ...] = ()
    channel: str = "emulator"


PLANNED = [
    Planned(
        "leave",
        0,
        "有給休暇の繰越しは最大何日までできますか？",
        Branch.CORRECT,
        "ja",
        timings={"rewrite": 2, "retrieve": 12, "grade": 30, "refine": 1, "generate": 5, "total": 40},
        files=("leave_policy.md",),
        channel="msteams",
    ),
    Planned(
        "leave-again",
        0,
        "有給休暇の繰越しは最大何日までできますか？",
        Branch.CORRECT,
        "ja",
        cache_hit=True,
        timings={"cache": 0.0, "total": 0.0},
        files=("leave_policy.md",),
        channel="msteams",
    ),
    Planned(
        "fee",
        1,
        "What is the parking fee at the Osaka office?",
        Branch.INCORRECT,
        timings={
            "rewrite": 1,
            "retrieve": 9,
            "grade": 25,
            "web": 70,
            "refine": 2,
            "generate": 4,
            "total": 100,
        },
        web=("https://example.com/osaka-parking",),
    ),
    Planned(
        "bikes",
        1,
        "Is there parking for bicycles at the Osaka office?",
        Branch.INCORRECT,
        refused=True,
        timings={"rewrite": 1, "retrieve": 8, "grade": 20, "refine": 1, "generate": 3, "total": 60},
    ),
    Planned(
        "room",
        2,
        "How do I book a meeting room at the Osaka office?",
        Branch.AMBIGUOUS,
        timings={
            "rewrite": 1,
            "retrieve": 10,
            "grade": 35,
            "research": 15,
            "refine": 2,
            "generate": 6,
            "total": 80,
        },
        files=("facilities.md",),
        web=("https://example.com/osaka-rooms",),
    ),
    # Ambiguous, from the documents alone (no web search configured): no gap in them.
    Planned(
        "desk",
        2,
        "Can I reserve a desk at the Osaka office?",
        Branch.AMBIGUOUS,
        timings={"rewrite": 1, "retrieve": 10, "grade": 30, "refine": 2, "generate": 6, "total": 50},
        files=("facilities.md",),
    ),
    Planned(
        "canteen",
        3,
        SCRIPT_QUESTION,
        Branch.INCORRECT,
        "ja",
        refused=True,
        timings={"rewrite": 1, "retrieve": 5, "grade": 9, "refine": 1, "generate": 2, "total": 20},
        channel="webchat",
    ),
    Planned("old", 10, "When is payday?", Branch.CORRECT, timings={"total": 5000}),  # before the window
]

# (answer, user, reaction, comment, days ago): the rating's time after `backdate`.
UNATTRIBUTED: list[Literal["up", "down"]] = ["up", "down"]
RATINGS = [
    ("leave", "u1", "up", "", 0),
    ("leave", "u2", "down", "", 0),
    ("fee", "u3", "down", SCRIPT_COMMENT, 1),
    ("bikes", "u4", "down", "", 1.01),
    ("room", "u5", "up", "", 2),
    ("old", "u6", "down", "", 10),
]


def result(p: Planned, now: datetime) -> CragResult:
    citations = [Citation(number=i + 1, kind="document", title=f, file=f) for i, f in enumerate(p.files)]
    citations += [
        Citation(number=len(citations) + i + 1, kind="web", title=u, url=u) for i, u in enumerate(p.web)
    ]
    return CragResult(
        id=f"r-{p.key}",
        created_at=now - timedelta(days=p.days_ago),
        question=p.question,
        language="ja" if p.language == "ja" else "en",
        branch=p.branch,
        answer=f"answer to {p.question}",
        refused=p.refused,
        cache_hit=p.cache_hit,
        timings_ms=p.timings or {},
        citations=citations,
        web=WebOutcome(status=WebStatus.OK if p.web else WebStatus.NOT_NEEDED),
    )


def anchor() -> datetime:
    """Noon UTC today: what the data is planned from, so "1 day ago" never crosses a second midnight
    however close to one the test runs (the same date in UTC and in Asia/Tokyo)."""
    return datetime.combine(datetime.now(UTC).date(), time(12), UTC)


async def fill(store: Feedback, now: datetime | None = None) -> datetime:
    """Write the planned answers and ratings; returns the `now` they were planned from. Ratings still
    carry the time they were made: call the store's backdate afterwards."""
    now = now or anchor()
    for p in PLANNED:
        await store.record_answer(result(p, now), f"conv-{p.key}", "asker", p.channel)
    for key, user, reaction, comment, _ in RATINGS:
        planned = next(p for p in PLANNED if p.key == key)
        receipt = await store.record_feedback(
            f"r-{key}",
            reaction,
            f"conv-{key}",
            user,
            planned.channel,
            comment=comment,  # type: ignore[arg-type]
        )
        assert receipt.outcome.value == "stored"
    # Two ratings that named no known answer (a client that sends no message id): counted apart.
    for reaction in UNATTRIBUTED:
        await store.record_unattributed(reaction, "conv-x", "rater", "msteams", "teams")
    return now


def rating_times(now: datetime) -> list[tuple[str, str, datetime]]:
    """(result id, user, when) for every rating, as `backdate` sets them."""
    return [(f"r-{key}", user, now - timedelta(days=days)) for key, user, _, _, days in RATINGS]


def sqlite_backdate(db: str, now: datetime) -> None:
    import sqlite3

    with sqlite3.connect(db) as conn:
        for result_id, user, when in rating_times(now):
            conn.execute(
                "UPDATE answer_feedback SET updated_at = ?, created_at = ?"
                " WHERE result_id = ? AND user_id = ?",
                (when.isoformat(), when.isoformat(), result_id, user),
            )


async def postgres_backdate(dsn: str, now: datetime) -> None:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        for result_id, user, when in rating_times(now):
            await conn.execute(
                "UPDATE answer_feedback SET updated_at = $1, created_at = $1"
                " WHERE result_id = $2 AND user_id = $3",
                when,
                result_id,
                user,
            )
    finally:
        await conn.close()
