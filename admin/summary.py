"""The dashboard's figures, computed from the stored answers and ratings of a window of days and the
engine handle's health: what /admin shows and /admin/api/summary returns.

Everything here is a pure function of its inputs (no clock, no I/O), so a store filled with known
answers gives known figures in tests.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import BaseModel

from admin.gaps import Analyze, Asked, group_by_keywords
from feedback.records import AnswerRecord, RatingRecord, UnattributedRecord

BRANCHES = ("correct", "ambiguous", "incorrect")
# The engine's stages in the order a turn runs them (crag/engine.py), then the whole turn.
STAGES = ("rewrite", "retrieve", "grade", "research", "web", "refine", "generate", "total")
MAX_DOWN_RATED = 20  # the newest; the page is read at a glance
MAX_GAP_GROUPS = 12
ANSWER_LIMIT = 20_000  # answers read per window: the newest ones when there are more


class Window(BaseModel):
    days: int
    start: datetime  # midnight of the first day, in the timezone
    end: datetime  # when the figures were computed
    timezone: str


class AnswerFigures(BaseModel):
    total: int
    truncated: bool  # more answers than ANSWER_LIMIT in the window: the figures are of the newest
    by_branch: dict[str, int]
    refused: int
    stopped: int  # turns the user stopped (Teams' Stop) before seeing an answer: not in the other figures
    by_channel: dict[str, int]
    by_language: dict[str, int]


class DayRatings(BaseModel):
    day: date
    answers: int
    up: int
    down: int


class BranchRatings(BaseModel):
    branch: str
    answers: int
    up: int
    down: int
    share_up: float | None  # of the ratings; None without any


class RatingFigures(BaseModel):
    total: int  # ratings of an answer: what the shares, days and branches count
    up: int
    down: int
    share_up: float | None
    # Ratings that named no answer the store knows (a client that sends no message id): counted
    # apart, in none of the figures above, since they cannot be said to be of any answer.
    unattributed: int
    unattributed_up: int
    by_day: list[DayRatings]
    by_branch: list[BranchRatings]


class DownRated(BaseModel):
    at: datetime
    question: str
    answer: str
    branch: str
    channel: str
    files: list[str]
    web: list[str]
    comment: str


class GapGroup(BaseModel):
    keywords: list[str]  # empty: questions without a topic word
    asked: int
    distinct: int
    refused: int
    web: int
    partial: int
    examples: list[str]


class GapFigures(BaseModel):
    asked: int  # answers in the window that were refused or went to the web (see `outcome`)
    refused: int
    web: int
    partial: int
    groups: list[GapGroup]
    more_groups: int  # groups beyond MAX_GAP_GROUPS
    more_asked: int


class StageLatency(BaseModel):
    stage: str
    turns: int
    p50_ms: float
    p95_ms: float


class LatencyFigures(BaseModel):
    turns: int  # answers with timings that were not served from the cache
    stages: list[StageLatency]


class CacheFigures(BaseModel):
    enabled: bool
    backend: str
    instance_hits: int  # this instance's counters since it started (as /api/health shows them)
    instance_misses: int
    instance_hit_rate: float | None
    answers: int  # stored answers in the window that say whether they were cache hits
    answer_hits: int
    answer_hit_rate: float | None


class DocumentFigures(BaseModel):
    status: str
    index: str
    documents: int | None  # None: a remote index, whose counts are not known here
    chunks: int | None
    skipped: int
    skipped_files: list[str]
    indexed_at: str | None
    ocr_pages_read: int | None
    ocr_pages_skipped: int | None


class AdminSummary(BaseModel):
    window: Window
    answers: AnswerFigures
    ratings: RatingFigures
    down_rated: list[DownRated]
    more_down_rated: int
    gaps: GapFigures
    latency: LatencyFigures
    cache: CacheFigures
    documents: DocumentFigures


def window(now: datetime, days: int, timezone: str) -> Window:
    zone = ZoneInfo(timezone)
    first = now.astimezone(zone).date() - timedelta(days=days - 1)
    return Window(days=days, start=datetime.combine(first, time(), zone), end=now, timezone=timezone)


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile: the smallest value with at least p % of the values at or below it."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def outcome(answer: AnswerRecord) -> str | None:
    """How the documents failed the question: refused; sent to the web because no passage was relevant
    (the incorrect branch, whether or not a web search is configured); or only partly covered, the
    answer citing web sources beside the documents. None when the documents answered it: an ambiguous
    answer from the documents alone (no web search, or none needed) is no gap in them."""
    if answer.refused:
        return "refused"
    if answer.branch == "incorrect":
        return "web"
    if answer.branch == "ambiguous" and answer.web_urls:
        return "partial"
    return None


def summarize(
    win: Window,
    answers: Sequence[AnswerRecord],
    ratings: Sequence[RatingRecord],
    analyze: Analyze,
    health: dict[str, Any],
    cache: dict[str, Any],
    skipped: Sequence[str],
    unattributed: Sequence[UnattributedRecord] = (),
) -> AdminSummary:
    """`answers`, `ratings` and `unattributed` (ratings that named no known answer) are those of the
    window; `health` is the engine handle's status payload, `cache` its cache status, `skipped` its
    skipped documents with their reasons."""
    zone = ZoneInfo(win.timezone)
    in_window = [a for a in answers if a.created_at >= win.start]
    # A stopped turn gave the user nothing to rate, to wait for or to miss: it is counted, no more.
    answers = [a for a in in_window if not a.stopped]
    ratings = [r for r in ratings if r.updated_at >= win.start]
    apart = [u for u in unattributed if u.created_at >= win.start]
    down_rated = _down_rated(ratings)
    return AdminSummary(
        window=win,
        answers=_answer_figures(answers, stopped=len(in_window) - len(answers)),
        ratings=_rating_figures(win, zone, answers, ratings, apart),
        down_rated=down_rated[:MAX_DOWN_RATED],
        more_down_rated=max(0, len(down_rated) - MAX_DOWN_RATED),
        gaps=_gaps(answers, analyze),
        latency=_latency(answers),
        cache=_cache(answers, cache),
        documents=_documents(health, skipped),
    )


def _answer_figures(answers: Sequence[AnswerRecord], stopped: int) -> AnswerFigures:
    branches = Counter(a.branch for a in answers)
    return AnswerFigures(
        total=len(answers),
        truncated=len(answers) + stopped >= ANSWER_LIMIT,
        stopped=stopped,
        by_branch={b: branches.get(b, 0) for b in (*BRANCHES, *sorted(set(branches) - set(BRANCHES)))},
        refused=sum(a.refused for a in answers),
        by_channel=dict(Counter(a.channel_id or "?" for a in answers).most_common()),
        by_language=dict(Counter(a.language for a in answers).most_common()),
    )


def _rating_figures(
    win: Window,
    zone: ZoneInfo,
    answers: Sequence[AnswerRecord],
    ratings: Sequence[RatingRecord],
    unattributed: Sequence[UnattributedRecord],
) -> RatingFigures:
    first = win.start.date()
    days = [first + timedelta(days=i) for i in range(win.days)]
    asked = Counter(a.created_at.astimezone(zone).date() for a in answers)
    rated = Counter((r.updated_at.astimezone(zone).date(), r.reaction) for r in ratings)
    by_day = [DayRatings(day=d, answers=asked[d], up=rated[d, "up"], down=rated[d, "down"]) for d in days]
    answered = Counter(a.branch for a in answers)
    by_branch_rated = Counter((r.branch, r.reaction) for r in ratings)
    names = [*BRANCHES, *sorted({r.branch for r in ratings} - set(BRANCHES))]
    by_branch = [
        BranchRatings(
            branch=b,
            answers=answered[b],
            up=by_branch_rated[b, "up"],
            down=by_branch_rated[b, "down"],
            share_up=_share(by_branch_rated[b, "up"], by_branch_rated[b, "up"] + by_branch_rated[b, "down"]),
        )
        for b in names
    ]
    up = sum(r.reaction == "up" for r in ratings)
    return RatingFigures(
        total=len(ratings),
        up=up,
        down=len(ratings) - up,
        share_up=_share(up, len(ratings)),
        unattributed=len(unattributed),
        unattributed_up=sum(u.reaction == "up" for u in unattributed),
        by_day=by_day,
        by_branch=by_branch,
    )


def _down_rated(ratings: Sequence[RatingRecord]) -> list[DownRated]:
    down = sorted((r for r in ratings if r.reaction == "down"), key=lambda r: r.updated_at, reverse=True)
    return [
        DownRated(
            at=r.updated_at,
            question=r.question,
            answer=r.answer,
            branch=r.branch,
            channel=r.channel_id,
            files=r.cited_files,
            web=r.web_urls,
            comment=r.comment,
        )
        for r in down
    ]


def _gaps(answers: Sequence[AnswerRecord], analyze: Analyze) -> GapFigures:
    # Oldest first, so a group's examples and labels do not depend on the store's order.
    asked = [
        Asked(a.question, kind)
        for a in sorted(answers, key=lambda a: (a.created_at, a.result_id))
        if (kind := outcome(a)) is not None
    ]
    groups = group_by_keywords(asked, analyze)
    shown = groups[:MAX_GAP_GROUPS]
    kinds = Counter(a.outcome for a in asked)
    return GapFigures(
        asked=len(asked),
        refused=kinds["refused"],
        web=kinds["web"],
        partial=kinds["partial"],
        groups=[
            GapGroup(
                keywords=g.keywords,
                asked=len(g.asked),
                distinct=g.distinct,
                refused=g.outcomes["refused"],
                web=g.outcomes["web"],
                partial=g.outcomes["partial"],
                examples=g.examples(),
            )
            for g in shown
        ],
        more_groups=len(groups) - len(shown),
        more_asked=sum(len(g.asked) for g in groups[MAX_GAP_GROUPS:]),
    )


def _latency(answers: Sequence[AnswerRecord]) -> LatencyFigures:
    # A cache hit's timings are not a turn's work: they would pull every percentile towards zero.
    timed = [a.timings_ms for a in answers if a.timings_ms is not None and not a.cache_hit]
    seen = {stage for t in timed for stage in t} - {"cache"}
    order = [*[s for s in STAGES if s in seen], *sorted(seen - set(STAGES))]
    stages = []
    for stage in order:
        values = [t[stage] for t in timed if stage in t]
        stages.append(
            StageLatency(
                stage=stage,
                turns=len(values),
                p50_ms=round(percentile(values, 50), 1),
                p95_ms=round(percentile(values, 95), 1),
            )
        )
    return LatencyFigures(turns=len(timed), stages=stages)


def _cache(answers: Sequence[AnswerRecord], status: dict[str, Any]) -> CacheFigures:
    known = [a for a in answers if a.timings_ms is not None]  # older rows do not say
    hits = sum(a.cache_hit for a in known)
    instance_hits, misses = int(status.get("hits", 0)), int(status.get("misses", 0))
    return CacheFigures(
        enabled=bool(status.get("enabled")),
        backend=str(status.get("backend", "")),
        instance_hits=instance_hits,
        instance_misses=misses,
        instance_hit_rate=_share(instance_hits, instance_hits + misses),
        answers=len(known),
        answer_hits=hits,
        answer_hit_rate=_share(hits, len(known)),
    )


def _documents(health: dict[str, Any], skipped: Sequence[str]) -> DocumentFigures:
    ocr = health.get("ocr") if isinstance(health.get("ocr"), dict) else None

    def count(value: Any) -> int | None:
        return int(value) if isinstance(value, int) else None

    return DocumentFigures(
        status=str(health.get("status", "unknown")),
        index=str(health.get("index", "")),
        documents=count(health.get("documents")),
        chunks=count(health.get("chunks")),
        skipped=int(health.get("skipped_documents", len(skipped)) or 0),
        skipped_files=list(skipped),
        indexed_at=health.get("indexed_at") or None,
        ocr_pages_read=count(ocr.get("pages_read")) if ocr else None,
        ocr_pages_skipped=count(ocr.get("pages_skipped")) if ocr else None,
    )
