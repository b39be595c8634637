"""HTTP-level guards of /api/messages: sizes, types and authentication, never a 500 for a client error."""

from __future__ import annotations

import json
from collections.abc import Iterator

import aiohttp
import pytest

from tests.fakes.bot_connector import FakeConnector, make_activity
from tests.paths import SAMPLE_DOCS
from tests.servers.app_process import AppProcess


@pytest.fixture(scope="module")
def authed_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppProcess]:
    # An app id switches authentication on (and the listen address to all interfaces: pin it).
    proc = AppProcess(
        tmp_path_factory.mktemp("authed"),
        SAMPLE_DOCS,
        MicrosoftAppId="00000000-0000-0000-0000-000000000001",
        MicrosoftAppPassword="not-a-real-secret",
        HOST="127.0.0.1",
    )
    proc.start()
    yield proc
    proc.stop()


async def _post(app: AppProcess, body: bytes, headers: dict[str, str]) -> int:
    async with (
        aiohttp.ClientSession() as session,
        session.post(app.url + "/api/messages", data=body, headers=headers) as resp,
    ):
        return resp.status


@pytest.mark.parametrize(
    ("auth", "status"),
    [
        (None, 401),
        ("Bearer xyz", 401),  # the SDK alone answers 500 here
        ("Basic dXNlcjpwYXNz", 401),
        ("Bearer aaa.bbb.ccc", 401),  # well-formed, but not a valid token
    ],
)
async def test_authentication_is_enforced_with_an_app_id(
    authed_app: AppProcess, connector: FakeConnector, auth: str | None, status: int
) -> None:
    headers = {"Content-Type": "application/json"}
    if auth:
        headers["Authorization"] = auth
    body = json.dumps(make_activity(connector.url, text="hello")).encode()
    assert await _post(authed_app, body, headers) == status
    assert connector.activities == []  # nothing reached the bot
    assert "not-a-real-secret" not in authed_app.log()


async def test_oversized_body_is_413(authed_app: AppProcess) -> None:
    body = b'{"type": "message", "text": "' + b"x" * (1024 * 1024 + 10) + b'"}'
    assert await _post(authed_app, body, {"Content-Type": "application/json"}) == 413


def test_the_startup_log_says_what_to_open(authed_app: AppProcess) -> None:
    log = authed_app.log()
    assert "/chat (Web Chat)" in log and "/api/messages" in log and "/api/health" in log
