"""POST /api/directline/token with a Direct Line secret: exchanged for a token at a fake Direct Line
token service on 127.0.0.1; the secret goes there as a Bearer header and nowhere else."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from crag.eval.loopback import serve_on_loopback
from tests.servers.harness import free_port
from tests.servers.webchat_harness import bearer, webchat_app

SECRET = "dl-secret-5f1d8a0c9e7b4c2a"


class FakeTokenService:
    """Direct Line's tokens/generate: answers like Azure, or with `status` when set."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.status = 200
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v3/directline/tokens/generate", self._generate)
        self._runner, base = await serve_on_loopback(app)
        self.url = f"{base}/v3/directline"

    async def stop(self) -> None:
        if self._runner:
            await self._runner.cleanup()

    async def _generate(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.calls.append({"authorization": request.headers.get("Authorization"), "body": body})
        if self.status != 200:
            return web.json_response({"error": {"code": "BadArgument", "message": "no"}}, status=self.status)
        n = len(self.calls)
        return web.json_response(
            {"conversationId": f"azure-conv-{n}", "token": f"azure-token-{n}", "expires_in": 3600}
        )


@pytest.fixture
async def directline() -> AsyncIterator[FakeTokenService]:
    fake = FakeTokenService()
    await fake.start()
    yield fake
    await fake.stop()


async def test_secret_is_exchanged_for_a_user_token(
    directline: FakeTokenService, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with webchat_app(DIRECT_LINE_SECRET=SECRET, DIRECT_LINE_ENDPOINT=directline.url) as h:
        response = await h.client.post("/api/directline/token")
        text = await response.text()
        assert response.status == 200, text
        body = await response.json()
        assert body["token"] == "azure-token-1" and body["conversationId"] == "azure-conv-1"
        assert body["expires_in"] == 3600 and body["domain"] == directline.url
        assert body["userId"].startswith("dl_")
        assert directline.calls == [
            {"authorization": f"Bearer {SECRET}", "body": {"user": {"id": body["userId"]}}}
        ]
        assert response.headers["Cache-Control"] == "no-store"

        # Every user gets an id of their own.
        second = await (await h.client.post("/api/directline/token")).json()
        assert second["userId"] != body["userId"]

        # The secret is nowhere a browser or a log could see it.
        page = await (await h.client.get("/chat")).text()
        for seen in (text, str(dict(response.headers)), page, caplog.text):
            assert SECRET not in seen
        # With a secret, the local Direct Line is off: conversations go to Azure.
        assert (await h.client.post("/v3/directline/conversations", headers=bearer("x"))).status == 404


async def test_token_requests_are_rate_limited_per_client(directline: FakeTokenService) -> None:
    async with webchat_app(
        DIRECT_LINE_SECRET=SECRET, DIRECT_LINE_ENDPOINT=directline.url, WEBCHAT_TOKENS_PER_MINUTE=3
    ) as h:
        statuses = [(await h.client.post("/api/directline/token")).status for _ in range(3)]
        assert statuses == [200, 200, 200]
        response = await h.client.post("/api/directline/token")
        assert response.status == 429
        assert int(response.headers["Retry-After"]) == 20  # one token per 20 s at 3 a minute
        assert (await response.json())["error"]["code"] == "TooManyRequests"
        assert len(directline.calls) == 3  # the refused request cost Direct Line nothing
        h.monotonic.now += 20
        assert (await h.client.post("/api/directline/token")).status == 200


@pytest.mark.parametrize("failure", ["status", "unreachable"])
async def test_direct_line_failures_are_a_clean_502(
    directline: FakeTokenService, failure: str, caplog: pytest.LogCaptureFixture
) -> None:
    endpoint = directline.url
    if failure == "status":
        directline.status = 403
    else:
        endpoint = f"http://127.0.0.1:{free_port()}/v3/directline"
    async with webchat_app(DIRECT_LINE_SECRET=SECRET, DIRECT_LINE_ENDPOINT=endpoint) as h:
        response = await h.client.post("/api/directline/token")
        assert response.status == 502
        text = await response.text()
        assert (await response.json())["error"]["code"] == "DirectLineUnavailable"
        assert SECRET not in text and SECRET not in caplog.text
        assert "token exchange failed" in caplog.text
