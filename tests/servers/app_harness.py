"""The real app (app.create_app) served in process on 127.0.0.1, and a threaded OpenID endpoint.

The OpenID endpoint runs in threads of its own, not on the test's event loop: a server that blocks
its event loop (as botframework-connector's key fetch did) then slows the app, not the keys' server.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

import app as app_module
from hosting.app_settings import BotSettings
from tests.paths import SAMPLE_DOCS

Client = TestClient[web.Request, web.Application]
APP_ID = "11111111-2222-3333-4444-555555555555"
ISSUER = "https://api.botframework.com"


def bot_settings(tmp: Path, **values: Any) -> BotSettings:
    defaults: dict[str, Any] = {
        "CRAG_DOCS_DIR": str(SAMPLE_DOCS),
        "CRAG_INDEX_DIR": str(tmp / "index"),
        "CRAG_FEEDBACK_DB": str(tmp / "feedback.sqlite3"),
        "CRAG_STATE_DB": str(tmp / "state.sqlite3"),
        "MicrosoftAppId": "",
        "MicrosoftAppPassword": "",
        "HOST": "127.0.0.1",
        "DIRECT_LINE_SECRET": "",
        "PUBLIC_BASE_URL": "",
        "CRAG_ALLOWED_HOSTS": "",
        "BOT_OPENID_METADATA_URL": "",
        "OPENAI_API_KEY": "",
        "AZURE_OPENAI_ENDPOINT": "",
        "AZURE_SEARCH_ENDPOINT": "",
        "SERPAPI_API_KEY": "",
    }
    return BotSettings(**{**defaults, **values})


@asynccontextmanager
async def serve_app(
    tmp: Path, ready: bool = False, **values: Any
) -> AsyncIterator[tuple[Client, web.Application]]:
    application = app_module.create_app(bot_settings(tmp, **values))
    async with TestClient(TestServer(application, host="127.0.0.1")) as client:
        if ready:
            assert await application[app_module.RUNTIME].wait_ready(60)
        yield client, application


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _b64int(n: int) -> str:
    return _b64(n.to_bytes((n.bit_length() + 7) // 8, "big"))


class ThreadedOpenId:
    """OpenID metadata at /openid and keys at /keys: "test-key" (endorsed for every channel used
    here) and "teams-key" (endorsed for msteams only). `delay` seconds before each metadata answer."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.teams_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.metadata_requests = 0
        self.metadata_answered = 0  # metadata answers sent (after the delay)
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/openid":
                    owner.metadata_requests += 1
                    time.sleep(owner.delay)
                    owner.metadata_answered += 1
                    body = {"issuer": ISSUER, "jwks_uri": f"{owner.url}/keys"}
                elif self.path == "/keys":
                    body = {
                        "keys": [
                            owner._jwk(owner.key, "test-key", ["msteams", "emulator", "webchat"]),
                            owner._jwk(owner.teams_key, "teams-key", ["msteams"]),
                        ]
                    }
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with suppress(OSError):
                    self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> ThreadedOpenId:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @staticmethod
    def _jwk(key: rsa.RSAPrivateKey, kid: str, endorsements: list[str]) -> dict[str, Any]:
        numbers = key.public_key().public_numbers()
        return {
            "kty": "RSA",
            "use": "sig",
            "kid": kid,
            "n": _b64int(numbers.n),
            "e": _b64int(numbers.e),
            "endorsements": endorsements,
        }

    def claims(self, service_url: str, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        claims = {"iss": ISSUER, "aud": APP_ID, "serviceurl": service_url, "nbf": now - 10, "exp": now + 600}
        claims.update(overrides)
        return {k: v for k, v in claims.items() if v is not None}

    def token(self, service_url: str, kid: str | None = "test-key", key: Any = None, **overrides: Any) -> str:
        headers = {"kid": kid} if kid else {}
        return jwt.encode(
            self.claims(service_url, **overrides), key or self.key, algorithm="RS256", headers=headers
        )

    def unsigned(self, service_url: str) -> str:
        """alg "none": no signature at all."""
        header = _b64(json.dumps({"alg": "none", "typ": "JWT", "kid": "test-key"}).encode())
        payload = _b64(json.dumps(self.claims(service_url)).encode())
        return f"{header}.{payload}."

    def hs256_with_public_key(self, service_url: str) -> str:
        """The classic key-confusion forgery: HMAC keyed with the published public key."""
        pem = self.key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "test-key"}).encode())
        payload = _b64(json.dumps(self.claims(service_url)).encode())
        signature = _b64(hmac.new(pem, f"{header}.{payload}".encode(), hashlib.sha256).digest())
        return f"{header}.{payload}.{signature}"
