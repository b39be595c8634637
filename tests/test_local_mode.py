"""Without an app id the bot is a loopback tool: loopback serviceUrls only, its own Host names only,
and no listening on other interfaces unless explicitly allowed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.bot_connector import FakeConnector, make_activity
from tests.paths import ROOT, SAMPLE_DOCS
from tests.servers.app_harness import serve_app
from tests.servers.harness import free_port


async def test_replies_go_only_to_loopback_service_urls(tmp_path: Path, connector: FakeConnector) -> None:
    async with serve_app(tmp_path) as (client, _):
        for url in (
            "http://evil.example/",
            "http://10.1.2.3:8080/",
            "https://169.254.169.254/",
            "file:///etc",
        ):
            response = await client.post("/api/messages", json=make_activity(url, text="help"))
            assert response.status == 403, url
        # The Emulator's own address still works (the FakeConnector listens on 127.0.0.1).
        response = await client.post("/api/messages", json=make_activity(connector.url, text="help"))
        assert response.status == 201
        assert await connector.wait_for_messages(1)
        localhost = connector.url.replace("127.0.0.1", "localhost")
        response = await client.post("/api/messages", json=make_activity(localhost, text="help"))
        assert response.status == 201


async def test_only_own_host_names_are_answered(tmp_path: Path) -> None:
    async with serve_app(tmp_path, CRAG_ALLOWED_HOSTS="bot.corp.example") as (client, _):
        port = client.port
        for host in (
            "evil.example",
            f"evil.example:{port}",
            "localhost.evil.example",
            "bot.corp.example.evil",
        ):
            for method, path in (
                ("POST", "/api/directline/token"),
                ("GET", "/chat"),
                ("GET", "/api/health"),
                ("GET", "/docs/leave_policy.md"),
            ):
                response = await client.request(method, path, headers={"Host": host})
                assert response.status == 403, (host, path)
        for host in (
            f"localhost:{port}",
            f"127.0.0.1:{port}",
            f"[::1]:{port}",
            "bot.corp.example",
            "LOCALHOST",
        ):
            response = await client.post("/api/directline/token", headers={"Host": host})
            assert response.status == 200, host


def _run_app(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {
        **{k: v for k, v in os.environ.items() if k not in ("MicrosoftAppId", "MicrosoftAppPassword")},
        "PORT": str(free_port()),
        "CRAG_DOCS_DIR": str(SAMPLE_DOCS),
        "CRAG_INDEX_DIR": str(tmp_path / "index"),
        "CRAG_FEEDBACK_DB": str(tmp_path / "feedback.sqlite3"),
        "CRAG_STATE_DB": str(tmp_path / "state.sqlite3"),
        **env,
    }
    return subprocess.run(
        [sys.executable, "app.py"], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=30
    )


def test_no_listening_on_all_interfaces_without_an_app_id(tmp_path: Path) -> None:
    for host in ("0.0.0.0", "::"):
        result = _run_app(tmp_path, HOST=host)
        assert result.returncode == 2, result.stderr[-2000:]
        assert "CRAG_ALLOW_REMOTE_UNAUTHENTICATED" in result.stderr


@pytest.mark.parametrize("setting", ["CRAG_INDEX_DIR", "CRAG_STATE_DB", "CRAG_FEEDBACK_DB"])
def test_a_folder_the_bot_cannot_write_is_named_at_start(tmp_path: Path, setting: str) -> None:
    # A path through a file: no user, root included, can make the folder (a volume owned by another
    # user fails the same way for a non-root user).
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", "utf-8")
    place = blocker / ("index" if setting == "CRAG_INDEX_DIR" else "x.sqlite3")
    result = _run_app(tmp_path, **{setting: str(place)})
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"cannot write to {place if setting == 'CRAG_INDEX_DIR' else blocker} ({setting})" in result.stderr
    assert "Traceback" not in result.stderr
