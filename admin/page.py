"""The dashboard's HTML: Jinja2 templates (admin/templates/) with autoescaping on for every value, so
questions, comments and file names (user input) always reach the page as text; charts are inline
SVG drawn from admin/charts.py. The page runs no script and loads nothing but its own stylesheet,
which the Content-Security-Policy enforces."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from admin import charts
from admin.summary import AdminSummary, BranchRatings, DayRatings, StageLatency
from hosting.ui_texts import Lang, has_text, t

HERE = Path(__file__).resolve().parent
STYLESHEET = HERE / "static" / "admin.css"
FAVICON = HERE / "static" / "favicon.svg"
DAY_CHOICES = (7, 30, 90)

# No script, no frame, no form posting elsewhere; the only resources are the stylesheet and the icon.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Cache-Control": "no-store",  # the figures hold colleagues' questions: no copy in any cache
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}

_env = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def _percent(share: float | None) -> str:
    return "–" if share is None else f"{share * 100:.0f}%"


def _ms(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:.1f}"


class Page:
    """Texts and formats in one language, for one render."""

    def __init__(self, lang: Lang, timezone: str) -> None:
        self.lang = lang
        self.zone = ZoneInfo(timezone)

    def tx(self, key: str, **values: Any) -> str:
        return t(key, self.lang, **values)

    def when(self, moment: datetime) -> str:
        return moment.astimezone(self.zone).strftime("%Y-%m-%d %H:%M")

    def branch(self, name: str) -> str:
        return self.tx(f"branch.{name}") if has_text(f"branch.{name}") else name

    def stage(self, name: str) -> str:
        return self.tx(f"admin.stage.{name}") if has_text(f"admin.stage.{name}") else name

    def link(self, days: int, lang: Lang) -> str:
        return "/admin?" + urlencode({"days": days, "lang": lang})


def render_dashboard(summary: AdminSummary, lang: Lang, bot_name: str) -> str:
    page = Page(lang, summary.window.timezone)

    def day_tip(d: DayRatings) -> str:
        return page.tx("admin.tip.day", day=d.day.isoformat(), up=d.up, down=d.down, answers=d.answers)

    def branch_caption(r: BranchRatings) -> str:
        return page.tx("admin.caption.branch", up=r.up, down=r.down, share=_percent(r.share_up))

    def branch_tip(r: BranchRatings) -> str:
        return page.tx(
            "admin.tip.branch", branch=page.branch(r.branch), caption=branch_caption(r), answers=r.answers
        )

    def stage_caption(s: StageLatency) -> str:
        return page.tx("admin.caption.stage", p50=_ms(s.p50_ms), p95=_ms(s.p95_ms))

    def stage_tip(s: StageLatency) -> str:
        return page.tx("admin.tip.stage", stage=page.stage(s.stage), caption=stage_caption(s), turns=s.turns)

    total = next((s for s in summary.latency.stages if s.stage == "total"), None)
    most_asked = max((g.asked for g in summary.gaps.groups), default=0)
    cache_share = summary.cache.answer_hit_rate
    if cache_share is None:
        cache_share = summary.cache.instance_hit_rate
    return _env.get_template("dashboard.html").render(
        s=summary,
        p=page,
        lang=lang,
        other_lang="en" if lang == "ja" else "ja",
        bot_name=bot_name,
        day_choices=DAY_CHOICES,
        percent=_percent,
        ms=_ms,
        total=total,
        gap_bar=lambda count: charts.meter(count, most_asked),
        cache_share=cache_share,
        cache_ring=charts.donut(cache_share),
        by_day=charts.ratings_by_day(summary.ratings.by_day, page.tx("admin.ratings_by_day"), day_tip),
        by_branch=charts.ratings_by_branch(
            summary.ratings.by_branch,
            page.tx("admin.ratings_by_branch"),
            page.branch,
            branch_caption,
            branch_tip,
        ),
        latency=charts.stage_latency(
            summary.latency.stages, page.tx("admin.latency"), page.stage, stage_caption, stage_tip
        ),
    )


def render_sign_in(
    lang: Lang, bot_name: str, key: bool, token: bool, app_id: str, message: str = "", days: int = 30
) -> str:
    """The form; `days` is the window asked for, kept through the sign-in."""
    page = Page(lang, "UTC")
    label = "admin.sign_in.key_or_token" if key and token else "admin.sign_in.key"
    if not key:
        label = "admin.sign_in.token"
    return _env.get_template("sign_in.html").render(
        p=page,
        lang=lang,
        bot_name=bot_name,
        label=page.tx(label),
        token=token,
        app_id=app_id,
        message=message,
        days=days,
    )


def render_message(lang: Lang, bot_name: str, message: str) -> str:
    return _env.get_template("message.html").render(
        p=Page(lang, "UTC"), lang=lang, bot_name=bot_name, message=message
    )
