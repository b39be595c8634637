"""GET /admin (the page), GET /admin/api/summary (the same figures as JSON), POST /admin/login and
/admin/logout, GET /admin/admin.css and /admin/favicon.svg: registered on the bot's app by app.py,
like /docs and /chat.

Every route but the stylesheet and the icon needs an admin (admin/authorization.py). Whatever goes wrong,
the answer is a page or a JSON error that says what to do, and a log line; never the figures, never
a stack trace.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis
from aiohttp import web

from admin.authorization import AdminAccess, client
from admin.errors import Denied
from admin.page import FAVICON, HEADERS, STYLESHEET, render_dashboard, render_message, render_sign_in
from admin.summary import ANSWER_LIMIT, AdminSummary, summarize, window
from crag.runtime.handle import EngineHandle
from crag.text.tokenize import Word, term_extractor
from feedback.protocol import Feedback
from hosting.app_settings import BotSettings
from hosting.logsafe import esc
from hosting.ui_texts import Lang, language_of, t

log = logging.getLogger(__name__)

MAX_DAYS = 365
DEFAULT_DAYS = 30
# Query parameters that would carry a credential in the URL (and so into logs and browser history).
_SECRET_PARAMS = frozenset({"key", "admin_key", "token", "access_token", "secret", "password"})


class AdminRoutes:
    def __init__(
        self,
        settings: BotSettings,
        feedback: Feedback,
        handle: EngineHandle,
        access: AdminAccess | None = None,
        shared: aioredis.Redis | None = None,
    ) -> None:
        self.settings = settings
        self.feedback = feedback
        self.handle = handle
        self.access = access or AdminAccess(settings, shared=shared)

    def register(self, app: web.Application) -> None:
        app.router.add_get("/admin", self.page)
        app.router.add_get("/admin/api/summary", self.api_summary)
        app.router.add_post("/admin/login", self.login)
        app.router.add_post("/admin/logout", self.logout)
        app.router.add_get("/admin/admin.css", self.stylesheet)
        app.router.add_get("/admin/favicon.svg", self.favicon)

    # --- the page -------------------------------------------------------------------------------

    async def page(self, request: web.Request) -> web.Response:
        lang = _lang(request)
        if _secret_in_url(request):
            return self._html(render_message(lang, self._name, t("admin.key_in_url", lang)), 400)
        try:
            admin = await self.access.identify(request)
            days = _days(request)
        except Denied as denied:
            return self._denied_page(request, denied, lang, days=_days_or_default(request))
        except ValueError:
            return self._html(render_message(lang, self._name, t("admin.bad_days", lang)), 400)
        summary = await self._summary(days)
        if summary is None:
            return self._html(render_message(lang, self._name, t("admin.unavailable", lang)), 503)
        log.info("admin dashboard shown to %s (%s) from %s", admin.who, admin.via, esc(client(request)))
        return self._html(render_dashboard(summary, lang, self._name))

    async def api_summary(self, request: web.Request) -> web.Response:
        if _secret_in_url(request):
            return _json_error(400, "admin.key_in_url")
        try:
            admin = await self.access.identify(request)
            days = _days(request)
        except Denied as denied:
            self._log_denied(request, denied)
            headers = {"Retry-After": str(int(denied.retry_after) + 1)} if denied.retry_after else {}
            if denied.status == 401 and self.access.entra is not None:
                headers["WWW-Authenticate"] = "Bearer"
            return _json_error(denied.status, denied.text_key, headers)
        except ValueError:
            return _json_error(400, "admin.bad_days")
        summary = await self._summary(days)
        if summary is None:
            return _json_error(503, "admin.unavailable")
        log.info("admin summary sent to %s (%s) from %s", admin.who, admin.via, esc(client(request)))
        return web.Response(
            text=summary.model_dump_json(),
            content_type="application/json",
            headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"},
        )

    # --- signing in and out ---------------------------------------------------------------------

    async def login(self, request: web.Request) -> web.Response:
        lang = _lang(request)
        if _secret_in_url(request):
            return self._html(render_message(lang, self._name, t("admin.key_in_url", lang)), 400)
        try:
            form = await request.post()
        except (ValueError, web.HTTPException):
            form = None
        secret = form.get("secret") if form is not None else None
        if form is not None and form.get("lang") in ("ja", "en"):
            lang = "ja" if form.get("lang") == "ja" else "en"
        wanted = form.get("days") if form is not None else None
        days = (
            int(wanted)
            if isinstance(wanted, str) and wanted.isdigit() and 1 <= int(wanted) <= MAX_DAYS
            else 0
        )
        try:
            admin, not_after = await self.access.sign_in(request, secret if isinstance(secret, str) else "")
        except Denied as denied:
            return self._denied_page(request, denied, lang, attempted=True, days=days or DEFAULT_DAYS)
        log.info("admin signed in (%s %s) from %s", admin.via, admin.who, esc(client(request)))
        response = _see_other(f"/admin?days={days}&lang={lang}" if days else f"/admin?lang={lang}")
        self.access.set_session(response, admin, not_after)
        return response

    async def logout(self, request: web.Request) -> web.Response:
        response = _see_other(f"/admin?lang={_lang(request)}")
        self.access.clear_session(response)
        return response

    async def stylesheet(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(
            STYLESHEET,
            headers={"Content-Type": "text/css; charset=utf-8", "Cache-Control": "no-cache", **_NOSNIFF},
        )

    async def favicon(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(
            FAVICON, headers={"Content-Type": "image/svg+xml", "Cache-Control": "max-age=86400", **_NOSNIFF}
        )

    # --- helpers --------------------------------------------------------------------------------

    @property
    def _name(self) -> str:
        return self.settings.bot_name

    async def _summary(self, days: int) -> AdminSummary | None:
        now = datetime.now(UTC)
        win = window(now, days, self.settings.admin_timezone)
        try:
            answers = await self.feedback.answers_since(win.start, ANSWER_LIMIT)
            ratings = await self.feedback.ratings_since(win.start)
            unattributed = await self.feedback.unattributed_since(win.start)
        except Exception as exc:  # the database down or refusing: said on the page, the details logged
            log.warning(
                "admin dashboard: could not read the feedback store (%s: %s)", type(exc).__name__, exc
            )
            return None
        _, health = self.handle.status()
        cache = self.handle.cache_status()
        skipped = list(self.handle.index.skipped)
        # Keyword extraction (Sudachi) and the arithmetic run off the event loop.
        return await asyncio.to_thread(
            summarize, win, answers, ratings, _analyze, health, cache, skipped, unattributed
        )

    def _denied_page(
        self,
        request: web.Request,
        denied: Denied,
        lang: Lang,
        attempted: bool = False,
        days: int = DEFAULT_DAYS,
    ) -> web.Response:
        self._log_denied(request, denied)
        headers = {"Retry-After": str(int(denied.retry_after) + 1)} if denied.retry_after else {}
        if denied.status in (401, 429, 503) and self.access.configured:
            # A first visit sees the form alone; a failed attempt sees why beside it.
            message = (
                ""
                if denied.text_key == "admin.sign_in.needed" and not attempted
                else t(denied.text_key, lang)
            )
            text = render_sign_in(
                lang,
                self._name,
                key=self.access.key_configured,
                token=self.access.entra is not None,
                app_id=self.settings.app_id,
                message=message,
                days=days,
            )
            return self._html(text, denied.status, headers)
        return self._html(render_message(lang, self._name, t(denied.text_key, lang)), denied.status, headers)

    @staticmethod
    def _log_denied(request: web.Request, denied: Denied) -> None:
        if denied.text_key in ("admin.sign_in.needed", "admin.off"):
            log.info("admin %s %s refused: %s", esc(request.method), esc(request.path), denied.reason)
        else:
            log.warning("admin access refused from %s: %s", esc(client(request)), denied.reason)

    @staticmethod
    def _html(text: str, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
        return web.Response(
            text=text, status=status, content_type="text/html", headers={**HEADERS, **(headers or {})}
        )


_NOSNIFF = {"X-Content-Type-Options": "nosniff"}


def _analyze(question: str) -> list[Word]:
    return term_extractor().analyze(question)


def _days(request: web.Request) -> int:
    raw = request.query.get("days", str(DEFAULT_DAYS))
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_DAYS:
        raise ValueError("days out of range")
    return int(raw)


def _days_or_default(request: web.Request) -> int:
    try:
        return _days(request)
    except ValueError:
        return DEFAULT_DAYS


def _lang(request: web.Request) -> Lang:
    chosen = request.query.get("lang")
    if chosen in ("ja", "en"):
        return "ja" if chosen == "ja" else "en"
    first = request.headers.get("Accept-Language", "").split(",")[0].split(";")[0].strip()
    return language_of(first)


def _secret_in_url(request: web.Request) -> bool:
    if any(name.lower() in _SECRET_PARAMS for name in request.query):
        log.warning("admin request with a credential in its URL refused (%s)", esc(request.path))
        return True
    return False


def _see_other(location: str) -> web.Response:
    return web.Response(status=303, headers={"Location": location, "Cache-Control": "no-store"})


def _json_error(status: int, text_key: str, headers: dict[str, Any] | None = None) -> web.Response:
    return web.json_response(
        {"error": t(text_key, "en")},
        status=status,
        headers={"Cache-Control": "no-store", **(headers or {})},
    )
