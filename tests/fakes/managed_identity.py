"""A managed-identity token endpoint on 127.0.0.1, as Container Apps and App Service give one to a
container (IDENTITY_ENDPOINT and IDENTITY_HEADER): azure-identity's own ManagedIdentityCredential,
inside DefaultAzureCredential, asks it for tokens exactly as in Azure.

Its tokens are JWTs shaped like Entra's (issuer sts.windows.net/TENANT/, audience = the requested
resource, the identity's object id as `oid`, an hour's lifetime), signed with a test key: Azurite's
OAuth mode reads those claims, and the other fakes check a token with `valid`. A thread of its own
serves it, so synchronous clients (the vector cache's Blob mirror) can call it from the test's
thread while the event loop is blocked.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest

SIGNING_KEY = "fake-managed-identity-signing-key-for-tests-only"
# What azure-identity reads to choose the credential; cleared so that only the fake answers.
IDENTITY_ENV = (
    "AZURE_CLIENT_ID",
    "AZURE_TENANT_ID",
    "AZURE_CLIENT_SECRET",
    "AZURE_CLIENT_CERTIFICATE_PATH",
    "AZURE_FEDERATED_TOKEN_FILE",
    "AZURE_USERNAME",
    "MSI_ENDPOINT",
    "MSI_SECRET",
    "IMDS_ENDPOINT",
    "IDENTITY_SERVER_THUMBPRINT",
)


class FakeManagedIdentity:
    def __init__(self) -> None:
        self.secret = secrets.token_hex(16)  # the X-IDENTITY-HEADER value the platform hands the app
        self.tenant = str(uuid.uuid4())
        self.principal_id = str(uuid.uuid4())  # the identity's object id
        self.requests: list[dict[str, str]] = []  # the query of each token request answered
        self.refused = 0  # requests without the right header
        self._issued: dict[str, str] = {}
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/msi/token"

    def token(self, resource: str) -> str:
        """The token this identity gets for resource: one per resource (a test can make it a
        database role's password before the client asks), valid for an hour from first use."""
        if resource not in self._issued:
            self._issued[resource] = self._new_token(resource)
        return self._issued[resource]

    def _new_token(self, resource: str, lifetime_s: int = 3600) -> str:
        now = int(time.time())
        claims = {
            "aud": resource,
            "iss": f"https://sts.windows.net/{self.tenant}/",
            "oid": self.principal_id,
            "sub": self.principal_id,
            "tid": self.tenant,
            "iat": now - 5,
            "nbf": now - 5,
            "exp": now + lifetime_s,
        }
        return jwt.encode(claims, SIGNING_KEY, algorithm="HS256")

    def valid(self, token: str, audience: str) -> bool:
        """Whether token is one this endpoint issued, for that audience, and not expired."""
        try:
            jwt.decode(token, SIGNING_KEY, algorithms=["HS256"], audience=audience)
        except jwt.PyJWTError:
            return False
        return True

    def resources(self) -> list[str]:
        return [r.get("resource", "") for r in self.requests]

    def start(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
                if parts.path != "/msi/token" or self.headers.get("X-IDENTITY-HEADER") != fake.secret:
                    fake.refused += 1
                    self._reply(401, {"error": "invalid_request", "error_description": "bad header"})
                    return
                resource = query.get("resource", "")
                if not resource or query.get("api-version") != "2019-08-01":
                    self._reply(400, {"error": "invalid_request", "error_description": "resource?"})
                    return
                fake.requests.append(query)
                token = fake.token(resource)
                self._reply(
                    200,
                    {
                        "access_token": token,
                        "expires_on": str(int(time.time()) + 3600),
                        "resource": resource,
                        "token_type": "Bearer",
                        "client_id": query.get("client_id", fake.principal_id),
                    },
                )

            def _reply(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return  # quiet: pytest shows failures, not every token request

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


@contextmanager
def managed_identity(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeManagedIdentity]:
    """The fake, started, and this process's environment pointing azure-identity at it alone."""
    fake = FakeManagedIdentity()
    fake.start()
    for name in IDENTITY_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("IDENTITY_ENDPOINT", fake.url)
    monkeypatch.setenv("IDENTITY_HEADER", fake.secret)
    try:
        yield fake
    finally:
        fake.stop()
