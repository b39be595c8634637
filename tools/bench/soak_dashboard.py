"""A soak run that fills the admin dashboard with real figures, then a screenshot of it.

    .venv/bin/python tools/bench/soak_dashboard.py [--conversations 75] [--turns 4] [--out
    docs/admin-dashboard.png]

Starts the real app (`python app.py`) on the embedded default over sample_docs/ (no services; the
answer cache on, as shipped) with a fake Bot Connector on 127.0.0.1, as bench_load.py does. Employees
are played from the questions of tests/data/sample_questions.jsonl and data/eval/sample-docs (answerable
ones and ones the documents do not cover): conversations in the Emulator, Web Chat and Teams channels,
a few at a time, most starting with one of a handful of popular questions (so the cache has repeats
to serve). Most answers are rated, through the card's buttons or Teams' own thumbs with a comment, more
often 👎 where the documents do not hold the answer. Then headless Chromium (Debian's /usr/bin/chromium)
signs in to /admin with the run's key and saves a full-page screenshot, reduced to a small palette PNG.
Prints what was sent and the dashboard's headline figures (from /admin/api/summary).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.bench_load import questions as sample_questions  # noqa: E402

from tests.fakes.bot_connector import FakeConnector, card_of, make_activity  # noqa: E402
from tests.servers.app_process import AppProcess  # noqa: E402
from tests.servers.chromium import CHROMIUM_ARGS  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
COMMENTS = [
    "古い情報のようです",
    "金額が書かれていません",
    "The answer does not say how to apply.",
    "別の拠点の場合を知りたい",
    "Not what I asked.",
]


def eval_questions() -> list[tuple[str, bool]]:
    """(question, answerable from the documents) of data/eval/sample-docs, follow-ups left out."""
    path = ROOT / "data" / "eval" / "sample-docs" / "questions.jsonl"
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    return [(r["question"], bool(r["in_corpus"])) for r in rows if not r.get("history")]


def teams_activity(connector: FakeConnector, conversation: str, user: str, **extra: Any) -> dict[str, Any]:
    activity = make_activity(
        connector.url, channel_id="msteams", conversation_id=conversation, user_id=user, **extra
    )
    activity["conversation"] = {"id": conversation, "conversationType": "personal", "tenantId": "tenant-1"}
    activity["channelData"] = {"tenant": {"id": "tenant-1"}}
    return activity


class Soak:
    def __init__(
        self, app: AppProcess, connector: FakeConnector, session: aiohttp.ClientSession, seed: int
    ) -> None:
        self.app = app
        self.connector = connector
        self.session = session
        self.random = random.Random(seed)
        self.turns = 0
        self.ratings = 0
        self.comments = 0
        self.errors: list[str] = []
        answerable = [(q, True) for q in sample_questions()]
        self.pool = answerable + eval_questions()
        self.popular = self.random.sample(answerable, 6) + self.random.sample(
            [q for q in self.pool if not q[1]], 2
        )

    async def post(self, activity: dict[str, Any]) -> int:
        async with self.session.post(self.app.url + "/api/messages", json=activity) as response:
            await response.read()
            return response.status

    def answer_in(self, conversation: str, since: int) -> dict[str, Any] | None:
        """The answer card posted to the conversation since the question (Web Chat's replies carry no
        replyToId; a conversation asks one question at a time)."""
        path = f"/v3/conversations/{conversation}/activities"
        return next(
            (
                a
                for a in self.connector.activities[since:]
                if a.get("_path", "").startswith(path) and a.get("type") == "message" and card_of(a)
            ),
            None,
        )

    async def conversation(self, c: int, turns: int) -> None:
        channel = ("emulator", "webchat", "msteams")[c % 3]
        conversation, user = f"soak-{c}", f"user-{c % 40}"
        for t in range(turns):
            question, answerable = self.random.choice(self.popular if t == 0 else self.pool)
            if channel == "msteams":
                ask = teams_activity(self.connector, conversation, user, text=question, locale="ja-JP")
            else:
                ask = make_activity(
                    self.connector.url,
                    text=question,
                    conversation_id=conversation,
                    user_id=user,
                    channel_id=channel,
                )
            since = len(self.connector.activities)
            status = await self.post(ask)
            answer = self.answer_in(conversation, since)
            if status != 201 or answer is None:
                self.errors.append(f"{conversation} turn {t}: HTTP {status}")
                continue
            self.turns += 1
            if self.random.random() > 0.7:
                continue  # most people do not rate
            liked = self.random.random() < (0.8 if answerable else 0.25)
            await self.rate(channel, conversation, user, answer, liked)

    async def rate(
        self, channel: str, conversation: str, user: str, answer: dict[str, Any], liked: bool
    ) -> None:
        if channel == "msteams":
            comment = "" if liked or self.random.random() < 0.4 else self.random.choice(COMMENTS)
            value = {
                "reaction": "like" if liked else "dislike",
                "feedback": json.dumps({"feedbackText": comment}),
            }
            click = teams_activity(
                self.connector,
                conversation,
                user,
                type="invoke",
                name="message/submitAction",
                replyToId=answer["id"],
                value={"actionName": "feedback", "actionValue": value},
            )
            self.comments += bool(comment)
            expected = 200
        else:
            card = card_of(answer) or {}
            reaction = "up" if liked else "down"
            action = next(a for a in card.get("actions", []) if a.get("data", {}).get("reaction") == reaction)
            click = make_activity(
                self.connector.url,
                value=action["data"],
                conversation_id=conversation,
                user_id=user,
                channel_id=channel,
            )
            expected = 201
        status = await self.post(click)
        if status == expected:
            self.ratings += 1
        else:
            self.errors.append(f"{conversation} rating: HTTP {status}")


def screenshot(url: str, key: str, out: Path, width: int) -> None:
    from PIL import Image
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=[*CHROMIUM_ARGS, "--force-device-scale-factor=1"],
        )
        try:
            page = browser.new_page(locale="en-US", viewport={"width": width, "height": 900})
            page.goto(url + "/admin?days=7&lang=en")
            page.fill("#secret", key)
            page.click("button[type=submit]")
            page.locator("#ratings-by-day svg.chart").wait_for()
            raw = out.with_suffix(".full.png")
            page.screenshot(path=str(raw), full_page=True)
        finally:
            browser.close()
    # A palette (no dithering) keeps flat charts and text as they are, at a fraction of the size.
    with Image.open(raw) as image:
        palette = image.convert("RGB").quantize(
            colors=128, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE
        )
        palette.save(out, optimize=True)
    raw.unlink()


async def main_async(args: argparse.Namespace) -> None:
    key = secrets.token_urlsafe(24)
    connector = FakeConnector()
    await connector.start()
    with tempfile.TemporaryDirectory() as tmp:
        app = AppProcess(Path(tmp), ROOT / "sample_docs", CRAG_ADMIN_KEY=key, CRAG_STREAMING="false")
        app.start()
        try:
            started = time.perf_counter()
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
                soak = Soak(app, connector, session, args.seed)
                gate = asyncio.Semaphore(args.parallel)

                async def one(c: int) -> None:
                    async with gate:
                        await soak.conversation(c, args.turns)

                await asyncio.gather(*(one(c) for c in range(args.conversations)))
                seconds = time.perf_counter() - started
                async with session.get(
                    app.url + "/admin/api/summary?days=7", headers={"X-Admin-Key": key}
                ) as response:
                    summary = await response.json()
            print(
                f"soak: {soak.turns} turns, {soak.ratings} ratings ({soak.comments} with a comment), "
                f"{len(soak.errors)} errors, {seconds:.0f} s"
            )
            for error in soak.errors[:10]:
                print("  error:", error)
            figures = {
                "answers": summary["answers"]["total"],
                "by_branch": summary["answers"]["by_branch"],
                "refused": summary["answers"]["refused"],
                "by_channel": summary["answers"]["by_channel"],
                "ratings": {k: summary["ratings"][k] for k in ("total", "up", "down", "share_up")},
                "gap_questions": summary["gaps"]["asked"],
                "gap_groups": [(g["keywords"], g["asked"]) for g in summary["gaps"]["groups"][:5]],
                "latency_total": next(
                    (s for s in summary["latency"]["stages"] if s["stage"] == "total"), None
                ),
                "cache": {k: summary["cache"][k] for k in ("answer_hits", "answers", "answer_hit_rate")},
                "documents": {k: summary["documents"][k] for k in ("documents", "chunks", "skipped")},
            }
            print(json.dumps(figures, ensure_ascii=False, indent=1))
            if not args.no_screenshot:
                out = ROOT / args.out
                out.parent.mkdir(parents=True, exist_ok=True)
                await asyncio.to_thread(screenshot, app.url, key, out, args.width)
                print(f"screenshot: {out.relative_to(ROOT)} ({out.stat().st_size // 1024} KB)")
        finally:
            app.stop()
            await connector.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=75)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--parallel", type=int, default=10)
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--out", default="docs/admin-dashboard.png")
    parser.add_argument("--no-screenshot", action="store_true")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
