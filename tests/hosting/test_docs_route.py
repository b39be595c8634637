"""/docs/ serves the indexed documents and nothing else; on the internet only through signed links.

The app runs in-process (aiohttp's test server on 127.0.0.1) over a documents folder that also holds
what an attacker looks for: .env, .git/config, a symlink to /etc/passwd, an SVG with a script.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from app import RUNTIME, create_app
from crag.core.models import Branch, Citation, CragResult
from hosting.app_settings import BotSettings
from hosting.doc_links import DocLinks

APP_ID = "11111111-2222-3333-4444-555555555555"
SVG = '<svg xmlns="http://www.w3.org/2000/svg"><script>fetch("/api/directline/token")</script></svg>'


def _docs(root: Path) -> Path:
    docs = root / "docs"
    (docs / "hr").mkdir(parents=True)
    (docs / "hr" / "leave.md").write_text("# 休暇\n\n有給休暇は最大10日まで繰り越せます。\n", "utf-8")
    (docs / "page.html").write_text(
        "<html><head><title>VPN</title></head><body><h1>VPN</h1><p>Use the VPN client.</p>"
        "<script>alert(1)</script></body></html>",
        "utf-8",
    )
    (docs / "evil.svg").write_text(SVG, "utf-8")
    (docs / ".env").write_text("MicrosoftAppPassword=hunter2\n", "utf-8")
    (docs / ".git").mkdir()
    (docs / ".git" / "config").write_text("[remote]\nurl = secret\n", "utf-8")
    (docs / ".hidden").mkdir()
    (docs / ".hidden" / "salaries.md").write_text("# Salaries\n\nSecret.\n", "utf-8")
    (docs / "passwd.md").symlink_to("/etc/passwd")
    return docs


async def _client(tmp_path: Path, **env: str) -> AsyncIterator[TestClient[Any, Any]]:
    settings = BotSettings(
        CRAG_DOCS_DIR=_docs(tmp_path),
        CRAG_INDEX_DIR=tmp_path / "index",
        CRAG_FEEDBACK_DB=tmp_path / "feedback.sqlite3",
        CRAG_STATE_DB=tmp_path / "state.sqlite3",
        **env,
    )
    client = TestClient(TestServer(create_app(settings), host="127.0.0.1"))
    await client.start_server()
    try:
        assert await client.app[RUNTIME].wait_ready(60), client.app[RUNTIME].error
        yield client
    finally:
        await client.close()


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[TestClient[Any, Any]]:
    async for client in _client(tmp_path):
        yield client


@pytest.fixture
async def internet(tmp_path: Path) -> AsyncIterator[TestClient[Any, Any]]:
    env = {
        "MicrosoftAppId": APP_ID,
        "MicrosoftAppPassword": "client-secret-for-test",
        "CRAG_HEALTH_KEY": "health-key-for-test",
        "HOST": "127.0.0.1",
    }
    async for client in _client(tmp_path, **env):
        yield client


async def _get(client: TestClient[Any, Any], path: str) -> tuple[int, dict[str, str], bytes]:
    async with client.get(path) as resp:
        return resp.status, dict(resp.headers), await resp.read()


async def test_only_indexed_documents_are_served(local: TestClient[Any, Any]) -> None:
    assert local.app[RUNTIME].index.files >= {"hr/leave.md", "page.html"}
    status, headers, body = await _get(local, "/docs/hr/leave.md")
    assert status == 200 and "有給休暇" in body.decode()
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Content-Security-Policy"].startswith("sandbox")
    for path in (
        "/docs/.env",
        "/docs/.git/config",
        "/docs/.hidden/salaries.md",
        "/docs/passwd.md",  # a symlink out of the folder
        "/docs/evil.svg",  # not a document the index holds
        "/docs/hr/../.env",
        "/docs/hr/%2e%2e/.env",
        "/docs/%2e%2e/%2e%2e/etc/passwd",
        "/docs/hr%2fleave.md%00",
        "/docs/%00",
        "/docs/hr/leave.md%00.txt",
        "/docs/hr/missing.md",
    ):
        status, _, body = await _get(local, path)
        assert status == 404, (path, status)
        assert b"hunter2" not in body and b"root:" not in body


async def test_active_content_cannot_run_on_the_bots_origin(local: TestClient[Any, Any]) -> None:
    status, headers, _ = await _get(local, "/docs/page.html")
    assert status == 200
    policy = headers["Content-Security-Policy"]
    assert policy.startswith("sandbox") and "allow-scripts" not in policy and "default-src 'none'" in policy
    assert headers["X-Content-Type-Options"] == "nosniff"


async def test_a_file_swapped_for_a_symlink_after_indexing_is_not_served(
    local: TestClient[Any, Any],
) -> None:
    leave = Path(local.app[RUNTIME].settings.docs_dir) / "hr" / "leave.md"
    leave.unlink()
    leave.symlink_to("/etc/passwd")
    status, _, body = await _get(local, "/docs/hr/leave.md")
    assert status == 404 and b"root:" not in body


async def test_with_an_app_id_only_signed_unexpired_links_open(internet: TestClient[Any, Any]) -> None:
    runtime = internet.app[RUNTIME]
    links = runtime.links
    assert links.signed
    url = f"{runtime.docs_url}/hr/leave.md"
    signed = links.sign_url(url)
    assert signed.startswith(url + "?exp=") and "&sig=" in signed
    path = signed[len(runtime.settings.base_url) :]
    status, headers, body = await _get(internet, path)
    assert status == 200 and "有給休暇" in body.decode()
    assert headers["Referrer-Policy"] == "no-referrer" and "no-store" in headers["Cache-Control"]

    expires = int(path.split("exp=")[1].split("&")[0])
    signature = path.split("sig=")[1]
    other = links.sign_url(f"{runtime.docs_url}/page.html").split("?")[1]
    for refused in (
        "/docs/hr/leave.md",  # unsigned
        f"/docs/hr/leave.md?exp={expires}",
        f"/docs/hr/leave.md?exp={expires + 3600}&sig={signature}",  # expiry moved
        f"/docs/hr/leave.md?exp={expires}&sig={signature[:-2]}AA",  # signature tampered
        f"/docs/hr/leave.md?{other}",  # another document's signature
        f"/docs/.env?exp={expires}&sig={signature}",
        f"/docs/hr/leave.md?exp=１２３&sig={signature}",
    ):
        status, _, body = await _get(internet, refused)
        assert status == 403, (refused, status)
        assert "有給休暇" not in body.decode()
    # Even a correctly signed link to a file outside the index is not served.
    status, _, _ = await _get(
        internet, links.sign_url(f"{runtime.docs_url}/.env")[len(runtime.settings.base_url) :]
    )
    assert status == 404


def test_links_expire_after_their_lifetime() -> None:
    now = [1_000_000.0]
    links = DocLinks("https://bot.example/docs", b"secret", 24 * 3600, clock=lambda: now[0])
    signed = links.sign_url("https://bot.example/docs/hr/%E4%BC%91%E6%9A%87.md")
    query = dict(part.split("=") for part in signed.split("?")[1].split("&"))
    assert int(query["exp"]) == 1_000_000 + 24 * 3600
    assert links.allows("hr/休暇.md", query["exp"], query["sig"])
    assert not links.allows("hr/other.md", query["exp"], query["sig"])
    now[0] += 24 * 3600 + 1
    assert not links.allows("hr/休暇.md", query["exp"], query["sig"])
    # Another bot (another secret) cannot mint links for this one.
    assert not DocLinks("https://bot.example/docs", b"other", 3600).allows(
        "hr/休暇.md", query["exp"], query["sig"]
    )
    # Web results and links elsewhere are left alone.
    assert links.sign_url("https://example.com/page") == "https://example.com/page"


def test_cards_carry_signed_links_only_when_the_bot_has_an_app_id() -> None:
    result = CragResult(
        question="q",
        language="ja",
        branch=Branch.AMBIGUOUS,
        answer="a [1][2]",
        citations=[
            Citation(number=1, kind="document", title="休暇", url="https://bot.example/docs/hr/leave.md"),
            Citation(number=2, kind="web", title="web", url="https://example.com/x"),
        ],
    )
    signed = DocLinks.from_settings("https://bot.example/docs", APP_ID, "", "password", 24).sign_result(
        result
    )
    assert "sig=" in signed.citations[0].url and signed.citations[1].url == "https://example.com/x"
    assert result.citations[0].url == "https://bot.example/docs/hr/leave.md"  # the engine's copy untouched
    plain = DocLinks.from_settings("http://localhost:3978/docs", "", "", "", 24).sign_result(result)
    assert plain.citations[0].url == "https://bot.example/docs/hr/leave.md"


async def test_health_tells_strangers_only_the_status(internet: TestClient[Any, Any]) -> None:
    async with internet.get("/api/health") as resp:
        assert resp.status == 200
        assert await resp.json() == {"status": "ok"}
    for wrong in ("", "nope", "health-key-for-tesT"):
        async with internet.get("/api/health", headers={"X-Health-Key": wrong}) as resp:
            assert await resp.json() == {"status": "ok"}
    async with internet.get("/api/health", headers={"X-Health-Key": "health-key-for-test"}) as resp:
        details = await resp.json()
    assert details["status"] == "ok" and details["documents"] >= 2 and "providers" in details


async def test_health_in_local_mode_shows_details(local: TestClient[Any, Any]) -> None:
    async with local.get("/api/health") as resp:
        details = await resp.json()
    assert details["status"] == "ok" and details["documents"] >= 2 and "providers" in details


def test_signature_lifetime_setting_is_read() -> None:
    settings = BotSettings(MicrosoftAppId=APP_ID, CRAG_LINK_TTL_HOURS=2, CRAG_LINK_SECRET="s3cret")
    links = DocLinks.from_settings(
        "https://bot.example/docs",
        settings.app_id,
        settings.link_secret.get_secret_value(),
        "",
        settings.link_ttl_hours,
    )
    before = time.time()
    exp = int(links.sign_url("https://bot.example/docs/a.md").split("exp=")[1].split("&")[0])
    assert before + 2 * 3600 - 2 <= exp <= time.time() + 2 * 3600 + 1
