"""Who may see /admin: the admin key, an Entra ID token of the admin group, or a signed session cookie
one of them earned at the sign-in form.

- The key (CRAG_ADMIN_KEY) comes in the X-Admin-Key header (scripts) or the sign-in form (browsers),
  never in a URL. It is compared in constant time (SHA-256 digests of both sides, so not even its
  length leaks).
- A token (CRAG_ADMIN_GROUP, with an app id) comes as `Authorization: Bearer …` or through the form;
  admin/entra_group.py checks it.
- A sign-in sets an HttpOnly, SameSite=Strict cookie holding an expiry and who signed in, signed
  with HMAC-SHA256 under a secret derived from the settings: never the key itself. Every instance and
  worker derives the same secret, so a session works on all of them; changing the key ends every
  session.
- Failed attempts are limited per client address, so the key cannot be guessed at line speed; with
  Redis (CRAG_CACHE_URL) every replica counts them together (hosting/shared_limits.py).

With neither setting the dashboard is off (404), in local mode too: other accounts of a shared machine
reach its loopback port as well, and the answers hold colleagues' questions and comments.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import re
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

import redis.asyncio as aioredis
from aiohttp import web

from admin.entra_group import EntraGroupTokens
from admin.errors import Denied
from hosting.app_settings import BotSettings
from hosting.client_address import client_of
from hosting.logsafe import esc
from hosting.shared_limits import SharedFailureLimit

log = logging.getLogger(__name__)

COOKIE = "crag_admin"
KEY_HEADER = "X-Admin-Key"
_JWT = re.compile(r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$")
_WHO = re.compile(r"^[A-Za-z0-9-]{1,64}$")


@dataclass(frozen=True)
class Admin:
    via: str  # "key", "entra" or "session"
    who: str  # "key", or the Entra ID object id of the member


class FailureLimit:
    """At most `limit` failed attempts per client address within `window` seconds; then 429 until the
    oldest of them is `window` old. Bounded: the least recently failing clients are forgotten first."""

    def __init__(
        self,
        limit: int = 10,
        window: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = 10_000,
    ) -> None:
        self.limit = limit
        self.window = window
        self._clock = clock
        self._max = max_clients
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def blocked(self, client: str) -> float:
        """Seconds until `client` may try again (0.0: now)."""
        times = self._failures.get(client)
        if not times:
            return 0.0
        now = self._clock()
        while times and now - times[0] >= self.window:
            times.popleft()
        if len(times) < self.limit:
            return 0.0
        return self.window - (now - times[0])

    def failed(self, client: str) -> None:
        times = self._failures.setdefault(client, deque())
        times.append(self._clock())
        self._failures.move_to_end(client)
        while len(times) > self.limit:
            times.popleft()
        while len(self._failures) > self._max:
            self._failures.popitem(last=False)


class Sessions:
    """Cookie values `<expiry>.<who>.<signature>`: nothing secret in them, nothing forgeable."""

    def __init__(self, secret: bytes, hours: float, clock: Callable[[], float] = time.time) -> None:
        self._secret = secret
        self.seconds = hours * 3600
        self._clock = clock

    def _sign(self, payload: str) -> str:
        digest = hmac.new(self._secret, payload.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    def issue(self, who: str, not_after: float | None = None) -> tuple[str, int]:
        """A cookie value for `who`, and its lifetime in seconds (no later than `not_after`)."""
        if not _WHO.match(who):
            raise ValueError("who must be a short id")
        now = self._clock()
        expires = int(min(now + self.seconds, not_after if not_after is not None else now + self.seconds))
        payload = f"{expires}.{who}"
        return f"{payload}.{self._sign(payload)}", max(0, expires - int(now))

    def verify(self, value: str) -> str | None:
        """Who the cookie was issued to, or None (forged, damaged or expired)."""
        parts = value.split(".")
        if len(parts) != 3 or not parts[0].isdigit() or not _WHO.match(parts[1]):
            return None
        payload = f"{parts[0]}.{parts[1]}"
        if not hmac.compare_digest(self._sign(payload).encode(), parts[2].encode()):
            return None
        if int(parts[0]) <= self._clock():
            return None
        return parts[1]


def session_secret(settings: BotSettings) -> bytes:
    """The same on every instance with the same settings; a new key makes a new secret. Without a key
    or an app password to derive it from (a managed identity), a random one: sessions then last only
    as long as this process and are not shared between workers."""
    material = "\0".join(
        [
            settings.admin_key.get_secret_value(),
            settings.app_password.get_secret_value(),
            settings.admin_group,
        ]
    )
    if not settings.admin_key.get_secret_value() and not settings.app_password.get_secret_value():
        log.info("admin sessions: no key or app password to derive a shared secret from; using a random one")
        return secrets.token_bytes(32)
    return hmac.new(b"crag-admin-session-v1", material.encode(), hashlib.sha256).digest()


class AdminAccess:
    def __init__(
        self,
        settings: BotSettings,
        entra: EntraGroupTokens | None = None,
        limit: FailureLimit | None = None,
        clock: Callable[[], float] = time.time,
        shared: aioredis.Redis | None = None,
    ) -> None:
        """shared: the Redis the failures are counted in across replicas (else in this one's memory)."""
        key = settings.admin_key.get_secret_value()
        self._key_digest = hashlib.sha256(key.encode()).digest() if key else b""
        if entra is None and settings.admin_group:
            entra = EntraGroupTokens(
                settings.admin_metadata_url,
                settings.admin_tenant,
                [settings.app_id, f"api://{settings.app_id}", settings.admin_audience],
                settings.admin_group,
                settings.auth_timeout,
            )
        self.entra = entra
        self.limit = SharedFailureLimit("admin-sign-in", limit or FailureLimit(), shared)
        self.sessions = Sessions(session_secret(settings), settings.admin_session_hours, clock)
        # Secure cookies when users reach the bot over https (behind a proxy the request itself is http).
        self.secure_cookie = settings.base_url.startswith("https://")

    @property
    def key_configured(self) -> bool:
        return bool(self._key_digest)

    @property
    def configured(self) -> bool:
        return self.key_configured or self.entra is not None

    def key_matches(self, given: str) -> bool:
        if not self._key_digest:
            return False
        return hmac.compare_digest(hashlib.sha256(given.encode()).digest(), self._key_digest)

    async def identify(self, request: web.Request) -> Admin:
        """Who is asking, from the header, the bearer token or the session cookie; Denied otherwise."""
        if not self.configured:
            raise Denied(404, "admin.off", "the dashboard is off (no CRAG_ADMIN_KEY or CRAG_ADMIN_GROUP)")
        given = request.headers.get(KEY_HEADER)
        if given is not None:
            return await self._by_key(client(request), given)
        authorization = request.headers.get("Authorization", "")
        if authorization.startswith("Bearer ") and self.entra is not None:
            return await self._by_token(client(request), authorization[len("Bearer ") :].strip())
        cookie = request.cookies.get(COOKIE)
        who = self.sessions.verify(cookie) if cookie else None
        if who is not None:
            return Admin("session", who)
        raise Denied(401, "admin.sign_in.needed", "no credentials")

    async def sign_in(self, request: web.Request, secret: str) -> tuple[Admin, float | None]:
        """The sign-in form's one field: an Entra ID access token when it looks like one and tokens
        are accepted, else the key. Returns who and, for a token, its expiry."""
        if not self.configured:
            raise Denied(404, "admin.off", "the dashboard is off (no CRAG_ADMIN_KEY or CRAG_ADMIN_GROUP)")
        secret = secret.strip()
        if self.entra is not None and _JWT.match(secret):
            oid, expires = await self._member(client(request), secret)
            return Admin("entra", oid), expires
        return await self._by_key(client(request), secret), None

    async def _by_key(self, address: str, given: str) -> Admin:
        await self._not_blocked(address)
        if not self.key_configured:
            await self.limit.failed(address)
            raise Denied(401, "admin.denied.no_key", "a key was sent, but only Entra ID sign-in is on")
        if not self.key_matches(given):
            await self.limit.failed(address)
            raise Denied(401, "admin.denied.key", "wrong admin key")
        return Admin("key", "key")

    async def _by_token(self, address: str, token: str) -> Admin:
        oid, _ = await self._member(address, token)
        return Admin("entra", oid)

    async def _member(self, address: str, token: str) -> tuple[str, float]:
        assert self.entra is not None
        await self._not_blocked(address)
        try:
            oid, expires = await self.entra.member(token)
        except Denied as denied:
            if denied.status != 503:  # the keys' endpoint being down is no attempt of the caller's
                await self.limit.failed(address)
            raise
        if not _WHO.match(oid):
            raise Denied(401, "admin.denied.token", "bearer token without a usable oid claim")
        return oid, expires

    async def _not_blocked(self, address: str) -> None:
        wait = await self.limit.blocked(address)
        if wait > 0:
            raise Denied(429, "admin.denied.too_many", f"too many failed attempts from {esc(address)}", wait)

    def set_session(self, response: web.StreamResponse, admin: Admin, not_after: float | None) -> None:
        value, max_age = self.sessions.issue(admin.who, not_after)
        response.set_cookie(
            COOKIE,
            value,
            max_age=max_age,
            path="/admin",
            httponly=True,
            samesite="Strict",
            secure=self.secure_cookie,
        )

    def clear_session(self, response: web.StreamResponse) -> None:
        response.del_cookie(
            COOKIE, path="/admin", httponly=True, samesite="Strict", secure=self.secure_cookie
        )


def client(request: web.Request) -> str:
    return client_of(request) or "unknown"
