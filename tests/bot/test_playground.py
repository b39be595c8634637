"""The Microsoft 365 Agents Playground (Microsoft's Teams-like test client, the one the README
recommends) against the real bot on the embedded default, driven in headless Chromium: the welcome
card, a Japanese and an English question answered with citations and the AI label, a refusal, then a
👍 with a comment on an OLDER answer.

What the Playground sends for that 👍 (version 0.2.28, pinned in tests/servers/package.json): a
`message/submitAction` invoke with {"actionName": "feedback", "actionValue": {"reaction": "like",
"feedback": "<the comment>"}} and no replyToId: its client knows the rated message's id but does not
pass it on. Nothing in the invoke names the answer, so the rating must be kept as an unattributed
rating; attached to "the conversation's latest answer" (what the bot did before) it would land on the
refusal. This test fails when it does.

Needs Debian's chromium and `npm ci` in tests/servers/ (both done by .ci/run). Screenshots of each
step go to test-artifacts/playground-*.png.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.paths import ROOT, SAMPLE_DOCS
from tests.servers.app_process import AppProcess
from tests.servers.chromium import CHROMIUM_ARGS
from tests.servers.harness import free_port, unavailable

CHROMIUM = Path("/usr/bin/chromium")
PLAYGROUND = ROOT / "tests" / "servers" / "node_modules" / ".bin" / "agentsplayground"
ARTIFACTS = ROOT / "test-artifacts"
TIMEOUT_MS = 60_000  # one answer on 2 shared cores, vectors being built meanwhile
JAPANESE = "有給休暇の繰越しは最大何日までできますか？"
ENGLISH = "What is the monthly remote work allowance?"
OFF_TOPIC = "What is the capital of Australia?"
COMMENT = "Clear, and the amount is right."

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright not installed (requirements-dev.txt)"
)


class Playground:
    """`agentsplayground -e <bot> -c msteams` on a free port, its own working directory and no
    telemetry (nothing is sent anywhere but to the bot)."""

    def __init__(self, tmp: Path, bot_url: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp / "playground.log"
        self.cwd = tmp / "playground"
        self.cwd.mkdir()
        self.args = [
            str(PLAYGROUND),
            *("-e", bot_url + "/api/messages", "-c", "msteams", "-p", str(self.port)),
            "--disable-telemetry",
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> None:
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(self.args, cwd=self.cwd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Playground exited with {self.proc.returncode}:\n{self.log()}")
            if f"Listening on {self.port}" in self.log():
                return
            time.sleep(0.2)
        raise RuntimeError(f"the Playground did not listen in {timeout}s:\n{self.log()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def log(self) -> str:
        return self.log_path.read_text("utf-8", errors="replace") if self.log_path.exists() else ""


@pytest.fixture
def bot_and_playground(tmp_path: Path) -> Iterator[tuple[AppProcess, Playground]]:
    # Skipped without them, a failure under .ci/run (CRAG_REQUIRE_SERVICES=1).
    if not CHROMIUM.exists():
        unavailable("headless Chromium not found at /usr/bin/chromium (apt-get install chromium)")
    if not PLAYGROUND.exists():
        unavailable(
            "the Agents Playground is not installed: tools/test_servers_install.sh (npm ci in tests/servers/)"
        )
    app = AppProcess(tmp_path, SAMPLE_DOCS)
    app.start()
    playground = Playground(tmp_path, app.url)
    try:
        playground.start()
        yield app, playground
    finally:
        playground.stop()
        app.stop()


def rows(db: Path, query: str, *args: Any) -> list[dict[str, Any]]:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute(query, args)]


def wait_for_rows(db: Path, query: str, timeout: float = 30.0) -> list[dict[str, Any]]:
    """The rows once there are some (the invoke is answered after its commit, but the browser's
    thanks may show before this process reads the file)."""
    deadline = time.monotonic() + timeout
    while True:
        found = rows(db, query)
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def test_a_thumbs_up_on_an_older_answer_never_lands_on_another(
    bot_and_playground: tuple[AppProcess, Playground],
) -> None:
    app, playground = bot_and_playground
    ARTIFACTS.mkdir(exist_ok=True)
    page_errors: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(Path(app.feedback_db).parent / "profile"),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1200, "height": 1400},
        )
        try:
            page = browser.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            page.on("pageerror", lambda e: page_errors.append(str(e)))

            def shot(name: str) -> None:
                page.screenshot(path=str(ARTIFACTS / f"playground-{name}.png"), full_page=True)

            def ask(question: str, expect: str) -> Any:
                """Send a question; the bot message that answers it (the one with `expect`)."""
                box = page.locator("[data-lexical-editor=true]")
                box.click()
                page.keyboard.type(question)
                page.keyboard.press("Enter")
                answer = page.locator("[aria-label='Message author']", has_text="Test Bot")
                message = answer.locator(
                    "xpath=ancestor::div[.//button[contains(@class,'FeedbackButton')]][1]"
                )
                found = message.filter(has_text=expect).last
                found.wait_for()
                return found

            # 1. The welcome card, on install (conversationUpdate), with its example questions.
            page.goto(playground.url)
            page.get_by_text(ENGLISH).first.wait_for()
            assert page.get_by_text("CRAG Assistant").count() >= 1
            shot("1-welcome")

            # 2. A Japanese question: the answer with Teams' AI label and a citation.
            japanese = ask(JAPANESE, "20日")
            assert "AI generated" in japanese.inner_text()
            assert japanese.locator("a.fai-Citation").count() >= 1  # Teams' citation marker
            page.get_by_text("社内文書").first.wait_for()  # the card's badge below the text
            shot("2-japanese")

            # 3. An English question, the same.
            english = ask(ENGLISH, "¥4,000")
            assert "AI generated" in english.inner_text()
            assert english.locator("a.fai-Citation").count() >= 1
            shot("3-english")

            # 4. A question the documents do not answer: the fixed refusal, nothing invented.
            refusal = ask(OFF_TOPIC, "I cannot answer")
            assert "Canberra" not in refusal.inner_text()
            shot("4-refusal")

            # 5. 👍 with a comment on the English answer: not the latest one.
            english.locator("button.fai-FeedbackButtons__positiveFeedbackButton").click()
            page.locator("textarea").fill(COMMENT)
            shot("5-comment")
            page.get_by_role("button", name="Submit").click()
            page.get_by_text("Thank you!").wait_for()  # the Playground's thanks: the invoke got a 200
            shot("6-thanks")
        finally:
            (ARTIFACTS / "playground-page.html").write_text(page.content(), encoding="utf-8")
            browser.close()

    db = app.feedback_db
    answers = rows(db, "SELECT result_id, question, refused, card_json FROM answers ORDER BY created_at")
    assert [a["question"] for a in answers] == [JAPANESE, ENGLISH, OFF_TOPIC], app.log()[-4000:]
    assert answers[2]["refused"] == 1
    # Each answer was stored under the id its stream was given (the Playground answers the final
    # message with 202 and no id: the stream's is the one id it ever gives the answer's message).
    ids = rows(db, "SELECT result_id, message_id, kind FROM answer_messages")
    assert sorted((m["result_id"], m["kind"]) for m in ids) == sorted(
        (a["result_id"], "stream") for a in answers
    )
    assert len({m["message_id"] for m in ids}) == 3

    unattributed = wait_for_rows(db, "SELECT * FROM unattributed_feedback")
    # Never on another answer: the refusal (the latest) nor any other got this rating.
    assert rows(db, "SELECT * FROM answer_feedback") == [], (
        "the rating was attached to an answer it did not name"
    )
    [kept] = unattributed
    assert (kept["reaction"], kept["comment"], kept["source"]) == ("up", COMMENT, "teams")
    assert kept["channel_id"] == "msteams" and kept["named_id"] == ""  # the Playground names no message
    assert "names no message (no replyToId)" in app.log()

    # The refusal's card shows only what was searched for its own question: not the allowance question
    # before it mixed in ("capital Australia / monthly remote work allowance capital Australia").
    searched = json.dumps(json.loads(answers[2]["card_json"]), ensure_ascii=False)
    assert "Australia" in searched and "allowance" not in searched
    assert not page_errors, page_errors
