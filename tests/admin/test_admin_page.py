"""The dashboard page: the figures of a known store as a person reads them, every user-written text
escaped, the headers that keep the page to itself; then the real app (`python app.py`) in headless
Chromium: signed in through the form, charts drawn, no script run, nothing fetched from elsewhere,
a screenshot kept in test-artifacts/admin/.

The browser test needs Debian's `chromium` (.ci/run installs it); playwright drives it and downloads
no browser of its own.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import app as app_module
from feedback.sqlite_store import FeedbackStore
from tests.admin.admin_data import SCRIPT_COMMENT, SCRIPT_QUESTION, fill, sqlite_backdate
from tests.paths import ROOT, SAMPLE_DOCS
from tests.servers.app_harness import Client, serve_app
from tests.servers.app_process import AppProcess
from tests.servers.chromium import CHROMIUM_ARGS

KEY = "correct-horse-battery-staple-0123"
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts" / "admin"


@pytest.fixture
async def keyed(tmp_path: Path) -> AsyncIterator[Client]:
    async with serve_app(tmp_path, ready=True, CRAG_ADMIN_KEY=KEY) as (client, _):
        now = await fill(client.app[app_module.RUNTIME].feedback)
        sqlite_backdate(str(tmp_path / "feedback.sqlite3"), now)
        yield client


async def page_text(client: Client, query: str = "?days=7&lang=en") -> str:
    response = await client.get("/admin" + query, headers={"X-Admin-Key": KEY})
    assert response.status == 200
    return await response.text()


def section(html: str, name: str) -> str:
    start = html.index(f'id="{name}"')
    return html[start : html.index("</section>", start)]


async def test_user_input_is_shown_as_text_never_as_markup(keyed: Client) -> None:
    html = await page_text(keyed)
    # The question's <script> and the comment's <img onerror> arrive escaped...
    assert "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;社員食堂のメニューは？" in html
    assert "&lt;img src=x onerror=&#34;document.title=&#39;pwned&#39;&#34;&gt;料金が違います" in html
    # ...and the page has no script or image element of any kind, its own or injected.
    assert not re.search(r"<\s*(script|img|iframe|object)", html, re.IGNORECASE)
    assert not re.search(r"<[^>]*\son\w+\s*=", html, re.IGNORECASE)  # no event handler attribute


async def test_the_page_shows_the_known_figures(keyed: Client) -> None:
    html = await page_text(keyed)
    kpi = re.search(r'id="kpi-answers">.*?class="value">([^<]+)<', html, re.S)
    assert kpi and kpi.group(1) == "7"
    assert re.search(r'id="kpi-share-up">.*?class="value">40%<', html, re.S)
    assert '<span id="unattributed">2 ratings naming no known answer (👍 1 · 👎 1), not counted above' in html
    assert re.search(r'id="kpi-gaps">.*?class="value">4<', html, re.S)
    assert re.search(r'id="kpi-latency">.*?class="value">50 ms<', html, re.S)  # p50 of the whole turn
    docs = keyed.app[app_module.RUNTIME].index.documents
    assert re.search(rf'id="kpi-documents">.*?class="value">{docs}<', html, re.S)
    # The gap group of the three Osaka office questions, and the thumbs-down with its web source.
    assert '<span class="tag">Osaka</span><span class="tag">office</span>' in html
    assert "https://example.com/osaka-parking" in html
    # Ratings on three of the seven days: today 👍 1 👎 1, yesterday 👎 2, the day before 👍 1.
    by_day = section(html, "ratings-by-day")
    assert by_day.count('class="up"><title>') == 2 and by_day.count('class="down"><title>') == 2
    assert by_day.count('class="none"><title>') == 4  # the days without a rating: a hairline
    assert ": 👍 0 · 👎 2 · 2 answers</title>" in by_day
    # By branch: the web branch's two thumbs-down, and (in the tooltip) its three answers.
    by_branch = section(html, "ratings-by-branch")
    assert ">👍 0 · 👎 2 (0% 👍)</text>" in by_branch
    assert "<title>🌐 From the web: 👍 0 · 👎 2 (0% 👍) · 3 answers</title>" in by_branch
    latency = section(html, "latency")
    assert ">p50 50 · p95 100 ms</text>" in latency and ">p50 70 · p95 70 ms</text>" in latency
    assert "<title>Whole turn: p50 50 · p95 100 ms (6 turns)</title>" in latency
    japanese = await page_text(keyed, "?days=7&lang=ja")
    assert "日別の評価" in japanese and "文書の不足" in japanese and 'lang="ja"' in japanese


async def test_the_page_is_kept_to_itself(keyed: Client) -> None:
    response = await keyed.get("/admin", headers={"X-Admin-Key": KEY})
    csp = response.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp and "frame-ancestors 'none'" in csp
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["X-Frame-Options"] == "DENY"
    css = await keyed.get("/admin/admin.css")
    assert css.status == 200 and css.headers["Content-Type"].startswith("text/css")
    assert "http" not in await css.text()  # no font or image from elsewhere


async def test_an_empty_store_gives_a_page_that_says_so(tmp_path: Path) -> None:
    async with serve_app(tmp_path, ready=True, CRAG_ADMIN_KEY=KEY) as (client, _):
        html = await page_text(client)
        assert "No data in this window." in html
        api = await client.get("/admin/api/summary", headers={"X-Admin-Key": KEY})
        body = await api.json()
        assert body["answers"]["total"] == 0 and body["ratings"]["share_up"] is None


async def test_a_store_that_cannot_be_read_is_a_clear_503(keyed: Client) -> None:
    store = keyed.app[app_module.RUNTIME].feedback
    assert isinstance(store, FeedbackStore)
    reader = store.reader
    await reader.close()  # the database gone from under the dashboard
    try:
        page = await keyed.get("/admin?lang=en", headers={"X-Admin-Key": KEY})
        assert page.status == 503 and "could not be read" in await page.text()
        api = await keyed.get("/admin/api/summary", headers={"X-Admin-Key": KEY})
        assert api.status == 503 and "could not be read" in (await api.json())["error"]
    finally:
        store._reader = None  # closed above; the store's close() must not close it twice


# --- in Chromium ----------------------------------------------------------------------------------


async def _prefill(db: Path) -> None:
    store = FeedbackStore(db)
    await store.open()
    try:
        now = await fill(store)
    finally:
        await store.close()
    sqlite_backdate(str(db), now)


@pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="headless Chromium not found at /usr/bin/chromium (apt-get install chromium)",
)
def test_the_dashboard_in_chromium(tmp_path: Path) -> None:
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright not installed (requirements-dev.txt)"
    )
    asyncio.run(_prefill(tmp_path / "feedback.sqlite3"))
    app = AppProcess(tmp_path, SAMPLE_DOCS, CRAG_ADMIN_KEY=KEY)
    app.start()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    requests: list[str] = []
    try:
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM),
                headless=True,
                args=[*CHROMIUM_ARGS, "--force-device-scale-factor=1"],
            )
            try:
                page = browser.new_page(locale="en-US", viewport={"width": 1280, "height": 900})
                page.set_default_timeout(30_000)
                page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
                page.on(
                    "console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None
                )
                page.on("request", lambda r: requests.append(r.url))
                page.on("dialog", lambda d: errors.append(f"dialog: {d.message}"))

                page.goto(app.url + "/admin?days=7")
                assert page.locator("form.sign-in").is_visible()
                page.fill("#secret", "wrong-key-wrong-key-00")
                page.click("button[type=submit]")
                assert "Wrong admin key." in page.locator("#message").inner_text()
                page.fill("#secret", KEY)
                page.click("button[type=submit]")
                page.locator("#ratings-by-day svg.chart").wait_for()

                assert page.title().startswith("Admin dashboard")  # not 'pwned': no injected script ran
                assert page.locator("#kpi-answers .value").inner_text() == "7"  # the 7 days asked for
                page.click("nav a:has-text('30 days')")
                page.locator("nav a[aria-current=page]:has-text('30 days')").wait_for()
                assert page.locator("#kpi-answers .value").inner_text() == "8"
                page.click("nav a:has-text('7 days')")
                page.locator("nav a[aria-current=page]:has-text('7 days')").wait_for()
                gaps = page.locator("#gaps").inner_text()
                assert SCRIPT_QUESTION in gaps  # shown as the text it is
                assert SCRIPT_COMMENT in page.locator("#down-rated").inner_text()
                assert page.locator("#down-rated img, #gaps script, #down-rated script").count() == 0
                assert page.locator("#ratings-by-day rect.up").count() == 2
                assert page.locator("#ratings-by-day rect.down").count() == 2
                assert page.locator("#latency rect.p50").count() == 8
                box = page.locator("#ratings-by-day svg.chart").bounding_box()
                assert box is not None and box["width"] > 600 and box["height"] > 100  # drawn, not collapsed
                page.screenshot(path=str(ARTIFACTS / "dashboard-en.png"), full_page=True)

                page.click("nav a[lang=ja]")
                page.locator("h1:has-text('管理ダッシュボード')").wait_for()
                assert "日別の評価" in page.locator("#ratings-by-day h2").inner_text()
                page.screenshot(path=str(ARTIFACTS / "dashboard-ja.png"), full_page=True)

                page.click("nav button:has-text('サインアウト')")
                assert page.locator("form.sign-in").is_visible()
            finally:
                browser.close()
    finally:
        app.stop()
    # The sign-in page is answered with 401 (before signing in, the wrong key, after signing out):
    # Chromium logs each such page load; anything else logged is a fault (a CSP violation included).
    refused = "Failed to load resource: the server responded with a status of 401 (Unauthorized)"
    assert [e for e in errors if e != refused] == []
    assert errors.count(refused) == 3
    assert requests and all(url.startswith(app.url + "/admin") for url in requests), requests
    assert (ARTIFACTS / "dashboard-en.png").stat().st_size > 20_000
