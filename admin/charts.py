"""The geometry of the dashboard's charts: rectangles and labels the page draws as inline SVG.

Numbers only: the template (admin/templates/) turns them into SVG elements and escapes every text.
Colours are CSS classes (admin/static/admin.css), so the page needs no inline style.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from admin.summary import BranchRatings, DayRatings, StageLatency


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    w: float
    h: float
    cls: str
    title: str = ""  # the tooltip (SVG <title>)


@dataclass(frozen=True)
class Label:
    x: float
    y: float
    text: str
    anchor: str = "start"  # SVG text-anchor
    cls: str = ""


@dataclass
class Chart:
    width: float
    height: float
    title: str  # the SVG's accessible name
    rects: list[Rect] = field(default_factory=list)
    labels: list[Label] = field(default_factory=list)
    lines: list[tuple[float, float, float, float]] = field(default_factory=list)  # grid lines


def nice_ceiling(value: float) -> float:
    """The axis maximum: 1, 2, 2.5 or 5 times a power of ten, at least `value` (and at least 1)."""
    if value <= 1:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= value:
            return float(step * power)
    return float(10 * power)


def ratings_by_day(days: Sequence[DayRatings], title: str, tip: Callable[[DayRatings], str]) -> Chart:
    """Stacked columns, 👍 below 👎, one per day; a y axis with three grid lines."""
    width, height, left, bottom, top = 1180.0, 200.0, 40.0, 26.0, 10.0
    chart = Chart(width, height, title)
    plot_w, plot_h = width - left - 8, height - bottom - top
    top_value = nice_ceiling(max((d.up + d.down for d in days), default=0))
    for i in range(3):
        value = top_value * i / 2
        y = top + plot_h - plot_h * i / 2
        chart.lines.append((left, y, width - 8, y))
        chart.labels.append(Label(left - 6, y + 4, _number(value), "end", "axis"))
    if not days:
        return chart
    slot = plot_w / len(days)
    bar = max(1.0, min(36.0, slot * 0.7))
    every = max(1, math.ceil(len(days) / 15))  # at most about fifteen dates under the axis
    for i, d in enumerate(days):
        x = left + i * slot + (slot - bar) / 2
        base = top + plot_h
        up_h = plot_h * d.up / top_value
        down_h = plot_h * d.down / top_value
        if d.up:
            chart.rects.append(Rect(x, base - up_h, bar, up_h, "up", tip(d)))
        if d.down:
            chart.rects.append(Rect(x, base - up_h - down_h, bar, down_h, "down", tip(d)))
        if not d.up and not d.down:
            chart.rects.append(Rect(x, base - 1, bar, 1, "none", tip(d)))
        if (len(days) - 1 - i) % every == 0:
            chart.labels.append(Label(x + bar / 2, height - 8, d.day.strftime("%m/%d"), "middle", "axis"))
    return chart


# The half-width charts: names on the left, bars in the middle, figures in a column on the right.
HALF_WIDTH, NAMES_W, FIGURES_W = 580.0, 175.0, 150.0
BARS_X = NAMES_W + 10  # where every bar starts
BARS_W = HALF_WIDTH - BARS_X - FIGURES_W - 10  # the longest bar


def _half_width(title: str, rows: int, row_h: float) -> Chart:
    return Chart(HALF_WIDTH, row_h * max(1, rows) + 6, title)


def _name_and_figures(chart: Chart, baseline: float, name: str, figures: str, name_cls: str = "") -> None:
    """A row's two texts: its name, right-aligned against the bars, and its figures after them."""
    chart.labels.append(Label(NAMES_W, baseline, name, "end", name_cls))
    chart.labels.append(Label(BARS_X + BARS_W + 10, baseline, figures, "start", "value"))


def ratings_by_branch(
    rows: Sequence[BranchRatings],
    title: str,
    name: Callable[[str], str],
    caption: Callable[[BranchRatings], str],
    tip: Callable[[BranchRatings], str],
) -> Chart:
    """One bar per branch, as long as its share of all ratings, split into 👍 and 👎."""
    row_h = 32.0
    chart = _half_width(title, len(rows), row_h)
    most = max((r.up + r.down for r in rows), default=0) or 1
    for i, r in enumerate(rows):
        y = 6 + i * row_h
        _name_and_figures(chart, y + 16, name(r.branch), caption(r))
        up_w = BARS_W * r.up / most
        if r.up:
            chart.rects.append(Rect(BARS_X, y + 3, up_w, 18, "up", tip(r)))
        if r.down:
            chart.rects.append(Rect(BARS_X + up_w, y + 3, BARS_W * r.down / most, 18, "down", tip(r)))
        if not r.up and not r.down:
            chart.rects.append(Rect(BARS_X, y + 3, 1, 18, "none", tip(r)))
    return chart


def stage_latency(
    stages: Sequence[StageLatency],
    title: str,
    name: Callable[[str], str],
    caption: Callable[[StageLatency], str],
    tip: Callable[[StageLatency], str],
) -> Chart:
    """A bar per stage: p95 long and light, p50 inside it, dark; one scale for every stage."""
    row_h = 26.0
    chart = _half_width(title, len(stages), row_h)
    most = max((s.p95_ms for s in stages), default=0.0) or 1.0
    for i, s in enumerate(stages):
        y = 6 + i * row_h
        _name_and_figures(chart, y + 14, name(s.stage), caption(s), "total" if s.stage == "total" else "")
        for value, cls in ((s.p95_ms, "p95"), (s.p50_ms, "p50")):
            chart.rects.append(Rect(BARS_X, y + 2, max(1.0, BARS_W * value / most), 16, cls, tip(s)))
    return chart


def meter(count: int, most: int, width: float = 160.0) -> float:
    """The length of a table row's count bar."""
    return round(width * count / most, 1) if most else 0.0


def donut(share: float | None, radius: float = 42.0) -> tuple[float, float]:
    """stroke-dasharray of a ring filled to `share`: (filled, circumference)."""
    circumference = 2 * math.pi * radius
    return round(circumference * (share or 0.0), 2), round(circumference, 2)


def _number(value: float) -> str:
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}"
