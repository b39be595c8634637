"""The dashboard's figures from a store filled with known answers and ratings (tests/admin/admin_data.py):
the real SQLite store, and the real PostgreSQL store on a throwaway server (skipped where PostgreSQL
is not installed, a failure in CI). Both stores must give the very same summary."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from admin.gaps import Asked, group_by_keywords
from admin.summary import AdminSummary, percentile, summarize, window
from crag.text.tokenize import term_extractor
from feedback.postgres_store import PostgresFeedbackStore
from feedback.protocol import Feedback, checked_answer_row
from feedback.records import UnattributedRecord
from feedback.sqlite_store import FeedbackStore
from tests.admin.admin_data import (
    PLANNED,
    SCRIPT_COMMENT,
    SCRIPT_QUESTION,
    fill,
    postgres_backdate,
    result,
    sqlite_backdate,
)
from tests.servers.postgres import PostgresServer

HEALTH = {
    "status": "ok",
    "index": "local",
    "documents": 12,
    "chunks": 140,
    "skipped_documents": 1,
    "indexed_at": "2026-12-01T09:00:00+00:00",
    "ocr": {"engine": "tesseract:jpn+eng", "pages_read": 3, "pages_skipped": 1},
}
CACHE = {"enabled": True, "backend": "memory", "entries": 4, "hits": 3, "misses": 9, "hit_rate": 0.25}
SKIPPED = ["scan.pdf: no text could be read"]


def analyze(question: str) -> list:  # type: ignore[type-arg]
    return term_extractor().analyze(question)


@pytest.fixture(params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest) -> PostgresServer | None:
    """None for SQLite; the session's PostgreSQL server (skipped, or failed in CI, without one)."""
    return request.getfixturevalue("postgres_server") if request.param == "postgres" else None


@pytest.fixture
async def filled(server: PostgresServer | None, tmp_path: Path) -> AsyncIterator[tuple[Feedback, datetime]]:
    if server is None:
        store: Feedback = FeedbackStore(tmp_path / "feedback.sqlite3")
        await store.open()
        now = await fill(store)
        sqlite_backdate(str(tmp_path / "feedback.sqlite3"), now)
        yield store, now
        await store.close()
        return
    name = await server.create_database()
    dsn = server.dsn(name)
    store = PostgresFeedbackStore(dsn, tmp_path / "pg.pending.jsonl", replay_interval=3600)
    await store.open()
    now = await fill(store)
    await postgres_backdate(dsn, now)
    yield store, now
    await store.close()
    await server.drop_database(name)


async def summary_of(store: Feedback, days: int = 7, timezone: str = "UTC") -> AdminSummary:
    win = window(datetime.now(UTC), days, timezone)
    answers = await store.answers_since(win.start, 1000)
    ratings = await store.ratings_since(win.start)
    unattributed = await store.unattributed_since(win.start)
    return summarize(win, answers, ratings, analyze, HEALTH, CACHE, SKIPPED, unattributed)


async def test_the_figures_of_a_known_week(filled: tuple[Feedback, datetime]) -> None:
    store, now = filled
    s = await summary_of(store)

    # Answers of the window: the one of ten days ago is not among them.
    assert s.answers.total == 7
    assert s.answers.by_branch == {"correct": 2, "ambiguous": 2, "incorrect": 3}
    assert s.answers.refused == 2
    assert s.answers.by_channel == {"emulator": 4, "msteams": 2, "webchat": 1}
    assert s.answers.truncated is False

    # Ratings: by the day each was last set, and by the rated answer's branch.
    assert (s.ratings.total, s.ratings.up, s.ratings.down, s.ratings.share_up) == (5, 2, 3, 0.4)
    # The two ratings that named no known answer: their own count, in none of the figures above.
    assert (s.ratings.unattributed, s.ratings.unattributed_up) == (2, 1)
    days = {d.day: (d.up, d.down, d.answers) for d in s.ratings.by_day}
    assert len(days) == 7
    today = now.date()
    assert days[today] == (1, 1, 2)
    assert days[today - timedelta(days=1)] == (0, 2, 2)
    assert days[today - timedelta(days=2)] == (1, 0, 2)
    assert days[today - timedelta(days=3)] == (0, 0, 1)
    assert sum(up + down for up, down, _ in days.values()) == 5
    branches = {b.branch: (b.answers, b.up, b.down, b.share_up) for b in s.ratings.by_branch}
    assert branches == {
        "correct": (2, 1, 1, 0.5),
        "ambiguous": (2, 1, 0, 1.0),
        "incorrect": (3, 0, 2, 0.0),
    }

    # Thumbs-down answers, newest first, with question, sources and comment.
    assert [d.question for d in s.down_rated] == [
        "有給休暇の繰越しは最大何日までできますか？",
        "What is the parking fee at the Osaka office?",
        "Is there parking for bicycles at the Osaka office?",
    ]
    fee = s.down_rated[1]
    assert fee.web == ["https://example.com/osaka-parking"] and fee.files == []
    assert fee.comment == SCRIPT_COMMENT and fee.branch == "incorrect"
    assert s.down_rated[0].files == ["leave_policy.md"] and s.down_rated[0].channel == "msteams"
    assert s.more_down_rated == 0

    # Content gaps: the three Osaka office questions share their keywords; the canteen stands alone.
    # The desk question, answered from the documents alone on the ambiguous branch, is none.
    assert (s.gaps.asked, s.gaps.refused, s.gaps.web, s.gaps.partial) == (4, 2, 1, 1)
    first, second = s.gaps.groups
    assert first.keywords[:2] == ["Osaka", "office"] and "parking" in first.keywords
    assert (first.asked, first.refused, first.web, first.partial) == (3, 1, 1, 1)
    assert set(first.examples) == {
        "What is the parking fee at the Osaka office?",
        "Is there parking for bicycles at the Osaka office?",
        "How do I book a meeting room at the Osaka office?",
    }
    assert (second.asked, second.refused, second.examples) == (1, 1, [SCRIPT_QUESTION])

    # Latency per stage over the six turns that ran (the cache hit's zeros are left out).
    stages = {x.stage: (x.turns, x.p50_ms, x.p95_ms) for x in s.latency.stages}
    assert s.latency.turns == 6
    assert stages["total"] == (6, 50.0, 100.0)  # 20 40 50 60 80 100: nearest rank
    assert stages["grade"] == (6, 25.0, 35.0)  # 9 20 25 30 30 35
    assert stages["web"] == (1, 70.0, 70.0) and stages["research"] == (1, 15.0, 15.0)
    assert [x.stage for x in s.latency.stages] == [
        "rewrite",
        "retrieve",
        "grade",
        "research",
        "web",
        "refine",
        "generate",
        "total",
    ]

    # Cache: the stored answers' share, and the instance's counters as the handle gives them.
    assert (s.cache.answers, s.cache.answer_hits) == (7, 1)
    assert s.cache.answer_hit_rate == round(1 / 7, 4)
    assert (s.cache.instance_hits, s.cache.instance_misses, s.cache.instance_hit_rate) == (3, 9, 0.25)

    # Documents, from the engine handle's health.
    d = s.documents
    assert (d.documents, d.chunks, d.skipped, d.skipped_files) == (12, 140, 1, SKIPPED)
    assert (d.ocr_pages_read, d.ocr_pages_skipped) == (3, 1)


async def test_a_wider_window_takes_the_older_answer_and_rating_in(filled: tuple[Feedback, datetime]) -> None:
    store, _ = filled
    s = await summary_of(store, days=30)
    assert s.answers.total == 8 and s.ratings.total == 6 and s.ratings.down == 4
    assert next(x for x in s.latency.stages if x.stage == "total").p95_ms == 5000.0
    assert len(s.ratings.by_day) == 30


def test_unattributed_ratings_before_the_window_are_not_counted() -> None:
    now = datetime.now(UTC)
    win = window(now, 7, "UTC")
    kept = [
        UnattributedRecord(
            created_at=when, reaction="down", comment="", source="teams", channel_id="msteams", named_id=""
        )
        for when in (now, win.start - timedelta(seconds=1))
    ]
    s = summarize(win, [], [], analyze, HEALTH, CACHE, SKIPPED, kept)
    assert (s.ratings.unattributed, s.ratings.unattributed_up, s.ratings.total) == (1, 0, 0)


async def test_days_begin_at_midnight_of_the_configured_time_zone(filled: tuple[Feedback, datetime]) -> None:
    store, now = filled
    s = await summary_of(store, timezone="Asia/Tokyo")
    assert s.window.start.utcoffset() == timedelta(hours=9)
    tokyo = {d.day: d for d in s.ratings.by_day}
    # The data is planned at noon UTC: 21:00 in Tokyo, the same date.
    for days_ago, up, down in [(0, 1, 1), (1, 0, 2), (2, 1, 0)]:
        day = (now - timedelta(days=days_ago)).date()
        if day in tokyo:  # near midnight UTC the Tokyo week may have begun a day later
            assert (tokyo[day].up, tokyo[day].down) == (up, down)


async def test_answers_stored_before_the_new_columns_count_but_have_no_timings(tmp_path: Path) -> None:
    """A database from before the dashboard: its answers get the new columns with defaults, count as
    answers and ratings, and stay out of latency and cache figures (they do not say)."""
    db = tmp_path / "old.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.executescript(
            """
            CREATE TABLE answers (result_id TEXT PRIMARY KEY, created_at TEXT NOT NULL,
              conversation_id TEXT NOT NULL, user_id TEXT NOT NULL, channel_id TEXT NOT NULL,
              language TEXT NOT NULL, question TEXT NOT NULL, answer TEXT NOT NULL, branch TEXT NOT NULL,
              cited_files TEXT NOT NULL, web_urls TEXT NOT NULL);
            """
        )
        conn.execute(
            "INSERT INTO answers VALUES ('old', ?, 'c', 'u', 'emulator', 'en', 'q?', 'a', 'correct', "
            "'[\"a.md\"]', '[]')",
            (datetime.now(UTC).isoformat(),),
        )
    store = FeedbackStore(db)
    await store.open()
    try:
        s = await summary_of(store)
        assert s.answers.total == 1
        assert s.latency.turns == 0 and s.latency.stages == []
        assert (s.cache.answers, s.cache.answer_hit_rate) == (0, None)
        # A 12-field row kept in the fallback file by the earlier version still replays.
        store.pending.keep(
            [
                {
                    "kind": "answer",
                    "row": [
                        "r2",
                        datetime.now(UTC).isoformat(),
                        "c",
                        "u",
                        "emulator",
                        "en",
                        "q2?",
                        "a",
                        "incorrect",
                        "[]",
                        "[]",
                        "",
                    ],
                }
            ]
        )
        assert await store.replay_pending() == 1
        s = await summary_of(store)
        assert s.answers.total == 2 and s.gaps.asked == 1
    finally:
        await store.close()


async def test_stopped_turns_are_counted_apart_from_the_answers(filled: tuple[Feedback, datetime]) -> None:
    """Teams' Stop: a turn stopped mid-way (no answer) and an answer stopped before it showed are both
    counted as stopped, and neither is an answer, a gap or a latency figure. Both stores."""
    store, now = filled
    before = await summary_of(store)
    await store.record_stopped("有休って来年に持ち越せる？", "ja", "conv-stop", "asker", "msteams")
    stopped_result = result(PLANNED[0], now).model_copy(update={"id": "r-stopped-late"})
    await store.record_answer(stopped_result, "conv-stop", "asker", "msteams")
    await store.record_answer(stopped_result, "conv-stop", "asker", "msteams", stopped=True)
    s = await summary_of(store)
    assert s.answers.stopped == 2 and before.answers.stopped == 0
    assert s.answers.total == before.answers.total
    assert s.answers.by_branch == before.answers.by_branch
    assert s.gaps.asked == before.gaps.asked and s.latency == before.latency
    records = {a.result_id: a for a in await store.answers_since(now - timedelta(days=1), 100)}
    assert records["r-stopped-late"].stopped and records["r-stopped-late"].answer == stopped_result.answer
    [early] = [a for a in records.values() if a.question == "有休って来年に持ち越せる？"]
    assert early.stopped and early.answer == "" and early.branch == "" and early.timings_ms is None


async def test_a_sixteen_field_row_of_the_fallback_file_replays_as_not_stopped(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "f.sqlite3")
    await store.open()
    try:
        row = ["r16", datetime.now(UTC).isoformat(), "c", "u", "emulator", "en", "q?", "a", "correct"]
        row += ['["a.md"]', "[]", "", "0", "0", "{}", "ok"]
        store.pending.keep([{"kind": "answer", "row": row}])
        assert await store.replay_pending() == 1
        s = await summary_of(store)
        assert (s.answers.total, s.answers.stopped) == (1, 0)
        with pytest.raises(ValueError, match="17 text fields"):
            checked_answer_row(row[:15])
    finally:
        await store.close()


async def test_the_new_answer_columns_hold_what_the_engine_said(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "f.sqlite3")
    await store.open()
    try:
        await fill(store)
    finally:
        await store.close()
    with sqlite3.connect(tmp_path / "f.sqlite3") as conn:
        row = conn.execute(
            "SELECT refused, cache_hit, timings_ms, web_status FROM answers WHERE result_id = 'r-fee'"
        ).fetchone()
        hit = conn.execute("SELECT cache_hit FROM answers WHERE result_id = 'r-leave-again'").fetchone()
    assert row[0] == 0 and row[1] == 0 and row[3] == "ok"
    assert json.loads(row[2])["web"] == 70
    assert hit == (1,)


def test_percentile_is_the_nearest_rank() -> None:
    values = [5, 1, 4, 2, 3]
    assert [percentile(values, p) for p in (1, 20, 21, 50, 95, 100)] == [1, 1, 2, 3, 5, 5]
    assert percentile([7.5], 95) == 7.5
    with pytest.raises(ValueError):
        percentile([], 50)


def test_gap_groups_form_around_the_most_shared_keyword_first() -> None:
    asked = [
        Asked("駐車場の料金はいくらですか？", "refused"),
        Asked("駐車場は何台まで使えますか？", "web"),
        Asked("大阪オフィスの駐車場の場所は？", "refused"),
        Asked("大阪オフィスの住所は？", "web"),
        Asked("大阪オフィスの電話番号は？", "partial"),
        Asked("？？", "refused"),
    ]
    groups = group_by_keywords(asked, analyze)
    # 駐車(場) and 大阪オフィス are each in three questions; the group taken first (the rarer word in
    # general language) keeps its three, the other gets the two left, labelled with both words they
    # share and nothing only one of them has. The question without a content word comes last.
    labels = [(g.keywords, len(g.asked)) for g in groups]
    assert labels == [(["駐車"], 3), (["オフィス", "大阪"], 2), ([], 1)]
    assert [a.question for a in groups[1].asked] == ["大阪オフィスの住所は？", "大阪オフィスの電話番号は？"]
    assert sum(len(g.asked) for g in groups) == len(asked)
    # A word everyone uses (日, day) gathers nothing: "how many days" questions about different topics
    # stay apart, each under its own topic.
    days = group_by_keywords([Asked("有給は何日？", "refused"), Asked("代休は何日？", "refused")], analyze)
    assert [g.keywords for g in days] == [["代休"], ["有給"]]
    # Asked again in other words, the same question is one example, counted twice.
    again = group_by_keywords([Asked("Parking fee?", "web"), Asked("parking fee", "web")], analyze)
    assert len(again) == 1 and len(again[0].asked) == 2 and again[0].distinct == 1
    assert again[0].examples() == ["Parking fee?"]
