"""With an app id, only tokens signed by the configured Bot Framework keys get in.

Tokens are signed here with a local RSA key, published by a fake OpenID metadata endpoint on
127.0.0.1 (BOT_OPENID_METADATA_URL), as login.botframework.com publishes the real ones.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import jwt
import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import rsa

from crag.eval.loopback import serve_on_loopback
from tests.fakes.bot_connector import FakeConnector, make_activity
from tests.paths import SAMPLE_DOCS
from tests.servers.app_process import AppProcess

APP_ID = "11111111-2222-3333-4444-555555555555"
ISSUER = "https://api.botframework.com"


def _b64(n: int) -> str:
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


class FakeOpenId:
    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/openid", self._metadata)
        app.router.add_get("/keys", self._keys)
        self._runner, self.url = await serve_on_loopback(app)

    async def stop(self) -> None:
        if self._runner:
            await self._runner.cleanup()

    async def _metadata(self, request: web.Request) -> web.Response:
        return web.json_response({"issuer": ISSUER, "jwks_uri": f"{self.url}/keys"})

    async def _keys(self, request: web.Request) -> web.Response:
        numbers = self.key.public_key().public_numbers()
        jwk = {
            "kty": "RSA",
            "use": "sig",
            "kid": "test-key",
            "n": _b64(numbers.n),
            "e": _b64(numbers.e),
            "endorsements": ["msteams", "emulator", "webchat"],
        }
        return web.json_response({"keys": [jwk]})

    def token(self, service_url: str, **overrides: Any) -> str:
        now = int(time.time())
        claims = {"iss": ISSUER, "aud": APP_ID, "serviceurl": service_url, "nbf": now - 10, "exp": now + 600}
        claims.update(overrides)
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": "test-key"})


@pytest.fixture
async def openid() -> AsyncIterator[FakeOpenId]:
    fake = FakeOpenId()
    await fake.start()
    yield fake
    await fake.stop()


async def _post(app: AppProcess, activity: dict[str, Any], token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession() as session,
        session.post(app.url + "/api/messages", json=activity, headers=headers) as resp,
    ):
        return resp.status


async def test_only_correctly_signed_tokens_are_accepted(
    openid: FakeOpenId, connector: FakeConnector, tmp_path: Path
) -> None:
    app = AppProcess(
        tmp_path,
        SAMPLE_DOCS,
        MicrosoftAppId=APP_ID,
        MicrosoftAppPassword="client-secret-for-test",
        BOT_OPENID_METADATA_URL=openid.url + "/openid",
        HOST="127.0.0.1",
    )
    app.start()
    try:
        activity = make_activity(connector.url, text="help", channel_id="msteams")
        other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        forged = jwt.encode(
            {"iss": ISSUER, "aud": APP_ID, "serviceurl": connector.url, "exp": int(time.time()) + 600},
            other_key,
            algorithm="RS256",
            headers={"kid": "test-key"},
        )
        rejected = {
            "wrong audience": openid.token(connector.url, aud="someone-else"),
            "wrong issuer": openid.token(connector.url, iss="https://evil.example"),
            "expired": openid.token(connector.url, exp=int(time.time()) - 3600, nbf=int(time.time()) - 7200),
            "forged signature": forged,
            "other service url": openid.token("https://elsewhere.example"),
        }
        for reason, token in rejected.items():
            assert await _post(app, activity, token) == 401, reason
        # A token signed with the published key gets past authentication. The reply then needs the
        # bot's own token from Entra ID, which this machine cannot reach: the bot says so with a 503
        # (try again later), never a 401 (the caller's token was fine) or a 500.
        status = await _post(app, activity, openid.token(connector.url))
        print("valid token ->", status)
        assert status not in (401, 403) and (status < 500 or status == 503), status
        if status == 503:
            assert "outbound token" in app.log()
        assert "client-secret-for-test" not in app.log()
        assert json.dumps(openid.token(connector.url)) not in app.log()
    finally:
        app.stop()
