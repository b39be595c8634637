"""Who gets the admin dashboard, on the real app (app.create_app) served on 127.0.0.1.

Off without CRAG_ADMIN_KEY / CRAG_ADMIN_GROUP; with the key: refused without it or with a wrong one,
the figures with the right one (header or sign-in form, then a signed HttpOnly SameSite=Strict
cookie); never the key in a URL or a log line; too many failures from one address get 429. With an app
id and CRAG_ADMIN_GROUP: Entra ID access tokens, signed here with a local RSA key and published by a
fake tenant OpenID endpoint on 127.0.0.1, are let in when their `groups` claim holds the group and
their issuer, tenant, audience, expiry and signature are right."""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import rsa

import app as app_module
from admin.authorization import COOKIE, FailureLimit, Sessions
from crag.eval.loopback import LoopbackServer
from hosting import redact
from hosting.app_settings import BotSettings
from tests.admin.admin_data import fill, sqlite_backdate
from tests.servers.app_harness import Client, bot_settings, serve_app

KEY = "correct-horse-battery-staple-0123"
APP_ID = "11111111-2222-3333-4444-555555555555"
TENANT = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
GROUP = "99999999-8888-7777-6666-555555555555"
OID = "12345678-1234-1234-1234-123456789abc"
QUESTION = "What is the parking fee at the Osaka office?"  # in the data: must never leak to a stranger


async def filled_app(client: Client, tmp: Path) -> None:
    store = client.app[app_module.RUNTIME].feedback
    now = await fill(store)
    sqlite_backdate(str(tmp / "feedback.sqlite3"), now)


# --- off ------------------------------------------------------------------------------------------


async def test_without_a_key_or_group_the_dashboard_is_off_and_says_how_to_turn_it_on(tmp_path: Path) -> None:
    async with serve_app(tmp_path, ready=True) as (client, _):
        await filled_app(client, tmp_path)
        page = await client.get("/admin", headers={"Accept-Language": "en"})
        text = await page.text()
        assert page.status == 404 and "Set CRAG_ADMIN_KEY" in text and QUESTION not in text
        api = await client.get("/admin/api/summary", headers={"X-Admin-Key": KEY})
        assert api.status == 404 and "CRAG_ADMIN_KEY" in (await api.json())["error"]
        login = await client.post("/admin/login", data={"secret": KEY})
        assert login.status == 404 and QUESTION not in await login.text()
        ja = await client.get("/admin", headers={"Accept-Language": "ja-JP,ja;q=0.9"})
        assert "管理ダッシュボードは無効です" in await ja.text()


# --- the key --------------------------------------------------------------------------------------


@pytest.fixture
async def keyed(tmp_path: Path) -> AsyncIterator[Client]:
    async with serve_app(tmp_path, ready=True, CRAG_ADMIN_KEY=KEY) as (client, _):
        await filled_app(client, tmp_path)
        yield client


async def test_no_key_and_a_wrong_key_are_refused_the_right_key_gets_the_figures(keyed: Client) -> None:
    none = await keyed.get("/admin/api/summary")
    assert none.status == 401 and QUESTION not in await none.text()
    wrong = await keyed.get("/admin/api/summary", headers={"X-Admin-Key": KEY[:-1] + "X"})
    assert wrong.status == 401 and (await wrong.json()) == {"error": "Wrong admin key."}
    short = await keyed.get("/admin/api/summary", headers={"X-Admin-Key": KEY[:5]})
    assert short.status == 401
    right = await keyed.get("/admin/api/summary", headers={"X-Admin-Key": KEY})
    assert right.status == 200 and right.headers["Cache-Control"] == "no-store"
    summary = await right.json()
    # The default window is 30 days: the answer and rating of ten days ago are in it.
    assert summary["answers"]["total"] == 8 and summary["ratings"]["down"] == 4
    assert QUESTION in {d["question"] for d in summary["down_rated"]}
    runtime = keyed.app[app_module.RUNTIME]
    assert summary["documents"]["documents"] == runtime.index.documents > 0
    assert summary["documents"]["chunks"] == runtime.index.chunks
    assert summary["cache"]["enabled"] is True and summary["window"]["days"] == 30

    page = await keyed.get("/admin", headers={"Accept-Language": "en"})
    text = await page.text()
    assert page.status == 401 and 'action="/admin/login"' in text and QUESTION not in text
    shown = await keyed.get("/admin?days=7", headers={"X-Admin-Key": KEY, "Accept-Language": "en"})
    assert shown.status == 200 and QUESTION in await shown.text()


async def test_the_sign_in_form_sets_a_signed_httponly_strict_cookie_that_is_not_the_key(
    keyed: Client,
) -> None:
    wrong = await keyed.post("/admin/login", data={"secret": "not-the-key-at-all-000", "lang": "en"})
    assert wrong.status == 401 and "Wrong admin key." in await wrong.text()
    assert COOKIE not in wrong.cookies
    signed = await keyed.post("/admin/login", data={"secret": KEY, "lang": "ja"}, allow_redirects=False)
    assert signed.status == 303 and signed.headers["Location"] == "/admin?lang=ja"
    header = signed.headers["Set-Cookie"]
    assert header.startswith(f"{COOKIE}=") and KEY not in header
    assert "HttpOnly" in header and "SameSite=Strict" in header and "Path=/admin" in header
    assert "Max-Age=28800" in header  # CRAG_ADMIN_SESSION_HOURS: 8
    page = await keyed.get("/admin?lang=ja")  # the client keeps the cookie
    text = await page.text()
    assert page.status == 200 and "管理ダッシュボード" in text and QUESTION in text
    assert page.headers["Content-Security-Policy"].startswith("default-src 'none'")
    api = await keyed.get("/admin/api/summary")
    assert api.status == 200
    # A tampered cookie is no session.
    value = keyed.session.cookie_jar.filter_cookies(keyed.make_url("/admin"))[COOKIE].value
    keyed.session.cookie_jar.clear()
    expires, who, signature = value.split(".")
    for forged in (f"{int(expires) + 86400}.{who}.{signature}", f"{expires}.admin.{signature}", KEY):
        response = await keyed.get("/admin/api/summary", headers={"Cookie": f"{COOKIE}={forged}"})
        assert response.status == 401, forged
    assert (await keyed.get("/admin/api/summary", headers={"Cookie": f"{COOKIE}={value}"})).status == 200
    # The window asked for before signing in is kept; anything else is not carried over.
    for days, location in (
        ("7", "/admin?days=7&lang=en"),
        ("999", "/admin?lang=en"),
        ("x", "/admin?lang=en"),
    ):
        again = await keyed.post(
            "/admin/login", data={"secret": KEY, "lang": "en", "days": days}, allow_redirects=False
        )
        assert again.headers["Location"] == location
    out = await keyed.post("/admin/logout", allow_redirects=False)
    assert out.status == 303 and f'{COOKIE}=""' in out.headers["Set-Cookie"]


async def test_a_key_in_the_url_is_refused_and_the_key_never_reaches_the_log(
    keyed: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # As app.main() does: the log filter that masks secrets (the key is one) and key=/token= in URLs.
    redactor = redact.install(redact.secret_values(keyed.app[app_module.RUNTIME].settings))
    for path in (f"/admin?key={KEY}", f"/admin/api/summary?token={KEY}", f"/admin/login?key={KEY}"):
        response = await (
            keyed.post(path) if "login" in path else keyed.get(path, headers={"X-Admin-Key": KEY})
        )
        assert response.status == 400, path
        assert QUESTION not in await response.text()
    await keyed.get("/admin/api/summary", headers={"X-Admin-Key": KEY})
    await keyed.get("/admin/api/summary", headers={"X-Admin-Key": "wrong-key-wrong-key-00"})
    await keyed.post("/admin/login", data={"secret": KEY})
    for handler in logging.getLogger().handlers:
        handler.removeFilter(redactor)
    assert "admin access refused" in caplog.text and "admin signed in (key key)" in caplog.text
    assert KEY not in caplog.text and "wrong-key-wrong-key-00" not in caplog.text
    assert 'GET /admin?key=*** HTTP/1.1" 400' in caplog.text  # aiohttp's access log, masked
    # The admin code itself writes neither, with or without the filter.
    admin_lines = [r.getMessage() for r in caplog.records if r.name.startswith("admin")]
    assert admin_lines and not any(KEY in line or "wrong-key-wrong" in line for line in admin_lines)


async def test_bad_days_are_a_clear_400(keyed: Client) -> None:
    for days in ("0", "366", "x", "-1", "2.5"):
        api = await keyed.get(f"/admin/api/summary?days={days}", headers={"X-Admin-Key": KEY})
        assert api.status == 400 and "1 to 365" in (await api.json())["error"]
    page = await keyed.get("/admin?days=0&lang=en", headers={"X-Admin-Key": KEY})
    assert page.status == 400 and "1 to 365" in await page.text()


async def test_too_many_failures_from_one_address_get_429_even_with_the_right_key(keyed: Client) -> None:
    signed = await keyed.post("/admin/login", data={"secret": KEY}, allow_redirects=False)
    session = signed.cookies[COOKIE].value
    keyed.session.cookie_jar.clear()
    for _ in range(10):
        assert (await keyed.get("/admin/api/summary", headers={"X-Admin-Key": "x" * 20})).status == 401
    blocked = await keyed.get("/admin/api/summary", headers={"X-Admin-Key": KEY})
    assert blocked.status == 429 and int(blocked.headers["Retry-After"]) > 0
    form = await keyed.post("/admin/login", data={"secret": KEY, "lang": "en"})
    assert form.status == 429 and "Too many failed attempts" in await form.text()
    # Someone signed in before keeps their session (behind a proxy, everyone shares one address).
    kept = await keyed.get("/admin/api/summary", headers={"Cookie": f"{COOKIE}={session}"})
    assert kept.status == 200


def test_failure_limit_forgets_failures_older_than_its_window() -> None:
    now = [0.0]
    limit = FailureLimit(limit=3, window=60, clock=lambda: now[0])
    for _ in range(3):
        assert limit.blocked("ip") == 0
        limit.failed("ip")
    assert limit.blocked("ip") == 60 and limit.blocked("other") == 0
    now[0] = 59.5
    assert limit.blocked("ip") == 0.5
    now[0] = 60.0
    assert limit.blocked("ip") == 0


def test_sessions_expire_and_refuse_forgeries() -> None:
    now = [1_000_000.0]
    sessions = Sessions(b"s" * 32, hours=1, clock=lambda: now[0])
    value, max_age = sessions.issue("key")
    assert max_age == 3600 and sessions.verify(value) == "key"
    assert Sessions(b"t" * 32, hours=1, clock=lambda: now[0]).verify(value) is None  # another secret
    assert sessions.verify(value.replace("key", "kez")) is None
    assert sessions.verify("garbage") is None and sessions.verify("1.2.3.4") is None
    short, short_age = sessions.issue(OID, not_after=now[0] + 600)  # a token expiring sooner
    assert short_age == 600
    now[0] += 601
    assert sessions.verify(short) is None and sessions.verify(value) == "key"
    now[0] += 3000
    assert sessions.verify(value) is None


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"CRAG_ADMIN_KEY": "short"}, "at least 16 characters"),
        ({"CRAG_ADMIN_GROUP": GROUP}, "needs MicrosoftAppId"),
        ({"CRAG_ADMIN_GROUP": "admins", "MicrosoftAppId": APP_ID}, r"object id \(a GUID\)"),
        ({"CRAG_ADMIN_GROUP": GROUP, "MicrosoftAppId": APP_ID}, "tenant's id"),
        ({"CRAG_ADMIN_TIMEZONE": "Mars/Olympus"}, "not a time zone"),
    ],
)
def test_unsound_admin_settings_are_refused_at_start(
    tmp_path: Path, values: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        bot_settings(tmp_path, **values)


def test_the_admin_key_is_a_secret_the_log_filter_masks(tmp_path: Path) -> None:
    from hosting.redact import secret_values

    settings: BotSettings = bot_settings(tmp_path, CRAG_ADMIN_KEY=KEY)
    assert KEY in secret_values(settings)


# --- Entra ID group -------------------------------------------------------------------------------


def _b64(n: int) -> str:
    return base64.urlsafe_b64encode(n.to_bytes((n.bit_length() + 7) // 8, "big")).rstrip(b"=").decode()


class FakeTenant(LoopbackServer):
    """The tenant's OpenID metadata and signing keys, as login.microsoftonline.com publishes them."""

    def __init__(self) -> None:
        super().__init__()
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.down = False

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/v2.0/.well-known/openid-configuration", self._metadata)
        app.router.add_get("/discovery/v2.0/keys", self._keys)

    @property
    def metadata_url(self) -> str:
        return f"{self.url}/v2.0/.well-known/openid-configuration"

    async def _metadata(self, request: web.Request) -> web.Response:
        if self.down:
            return web.Response(status=503)
        issuer = f"https://login.microsoftonline.com/{TENANT}/v2.0"
        return web.json_response({"issuer": issuer, "jwks_uri": f"{self.url}/discovery/v2.0/keys"})

    async def _keys(self, request: web.Request) -> web.Response:
        numbers = self.key.public_key().public_numbers()
        jwk = {"kty": "RSA", "use": "sig", "kid": "tenant-key", "n": _b64(numbers.n), "e": _b64(numbers.e)}
        return web.json_response({"keys": [jwk]})

    def token(self, key: Any = None, kid: str = "tenant-key", **overrides: Any) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": f"https://login.microsoftonline.com/{TENANT}/v2.0",
            "aud": APP_ID,
            "tid": TENANT,
            "oid": OID,
            "scp": "Dashboard.Read",
            "groups": ["00000000-0000-0000-0000-000000000001", GROUP],
            "iat": now,
            "nbf": now - 5,
            "exp": now + 3600,
        }
        claims.update(overrides)
        claims = {k: v for k, v in claims.items() if v is not None}
        return jwt.encode(claims, key or self.key, algorithm="RS256", headers={"kid": kid})


@pytest.fixture
async def tenant() -> AsyncIterator[FakeTenant]:
    fake = FakeTenant()
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture
async def entra(tmp_path: Path, tenant: FakeTenant) -> AsyncIterator[Client]:
    async with serve_app(
        tmp_path,
        ready=True,
        MicrosoftAppId=APP_ID,
        MicrosoftAppPassword="app-password-for-tests",
        CRAG_ADMIN_GROUP=GROUP,
        CRAG_ADMIN_TENANT_ID=TENANT,
        CRAG_ADMIN_OPENID_METADATA_URL=tenant.metadata_url,
    ) as (client, _):
        await filled_app(client, tmp_path)
        yield client


async def _status(client: Client, token: str) -> int:
    response = await client.get("/admin/api/summary", headers={"Authorization": f"Bearer {token}"})
    if response.status != 200:
        assert QUESTION not in await response.text()
    return response.status


async def test_a_member_of_the_admin_group_gets_the_figures_with_an_access_token(
    entra: Client, tenant: FakeTenant
) -> None:
    response = await entra.get(
        "/admin/api/summary?days=7", headers={"Authorization": f"Bearer {tenant.token()}"}
    )
    assert response.status == 200 and (await response.json())["answers"]["total"] == 7
    # A v1.0 token for the App ID URI (accessTokenAcceptedVersion unset) is the same member.
    v1 = tenant.token(iss=f"https://sts.windows.net/{TENANT}/", aud=f"api://{APP_ID}")
    assert await _status(entra, v1) == 200
    assert await _status(entra, tenant.token(groups=[GROUP.upper()])) == 200


@pytest.mark.parametrize(
    ("claims", "status"),
    [
        ({"groups": ["00000000-0000-0000-0000-000000000001"]}, 403),  # not in the group
        ({"groups": None}, 403),  # no groups claim at all
        ({"groups": None, "hasgroups": True}, 403),  # too many groups to list (overage)
        ({"iss": "https://api.botframework.com"}, 401),  # the Bot Framework's token for the same app
        ({"iss": f"https://login.microsoftonline.com/{GROUP}/v2.0", "tid": GROUP}, 401),  # another tenant
        ({"tid": GROUP}, 401),  # tenant claim and issuer disagree
        ({"aud": "https://graph.microsoft.com"}, 401),  # a token for another resource
        ({"exp": int(time.time()) - 600}, 401),  # expired (beyond the minute of leeway)
        ({"scp": None}, 401),  # an ID token or an app-only token: not a person's access token
    ],
)
async def test_tokens_that_must_not_get_in(
    entra: Client, tenant: FakeTenant, claims: dict[str, Any], status: int
) -> None:
    assert await _status(entra, tenant.token(**claims)) == status


async def test_forged_and_malformed_tokens_are_401(entra: Client, tenant: FakeTenant) -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assert await _status(entra, tenant.token(key=other)) == 401  # right kid, wrong key
    assert await _status(entra, tenant.token(kid="unknown")) == 401
    header = base64.urlsafe_b64encode(b'{"alg":"none","kid":"tenant-key"}').rstrip(b"=").decode()
    body = tenant.token().split(".")[1]
    assert await _status(entra, f"{header}.{body}.") == 401
    assert await _status(entra, "not-a-token") == 401
    # A key sent where only Entra ID sign-in is on.
    keyed = await entra.get("/admin/api/summary", headers={"X-Admin-Key": KEY})
    assert keyed.status == 401 and "use an Entra ID access token" in (await keyed.json())["error"]


async def test_a_tenant_whose_keys_cannot_be_fetched_is_503_not_a_refusal(
    entra: Client, tenant: FakeTenant
) -> None:
    tenant.down = True
    assert await _status(entra, tenant.token()) == 503


async def test_a_token_signs_in_through_the_form_for_no_longer_than_it_lasts(
    entra: Client, tenant: FakeTenant
) -> None:
    page = await entra.get("/admin", headers={"Accept-Language": "en"})
    text = await page.text()
    assert page.status == 401 and "Entra ID access token" in text and f"api://{APP_ID}" in text
    token = tenant.token(exp=int(time.time()) + 1200)
    signed = await entra.post("/admin/login", data={"secret": token, "lang": "en"}, allow_redirects=False)
    assert signed.status == 303
    max_age = int(signed.headers["Set-Cookie"].split("Max-Age=")[1].split(";")[0])
    assert 1100 < max_age <= 1200
    assert "Secure" not in signed.headers["Set-Cookie"]  # PUBLIC_BASE_URL is http here
    shown = await entra.get("/admin?lang=en")
    assert shown.status == 200 and QUESTION in await shown.text()
    stranger = tenant.token(groups=["00000000-0000-0000-0000-000000000001"])
    refused = await entra.post("/admin/login", data={"secret": stranger, "lang": "en"})
    assert refused.status == 403 and "not a member of the admin group" in await refused.text()
