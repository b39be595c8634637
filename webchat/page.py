"""GET /chat: the Web Chat page, its script and style, and the botframework-webchat bundle.

The bundle comes from npm (webchat/package.json, installed by ./run.sh into webchat/node_modules)
and is served by the app itself, so the page loads nothing from a CDN. Without it, /chat explains
how to install it instead of failing.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from string import Template
from typing import Any

from aiohttp import web

from hosting.ui_texts import LANGS, t

HERE = Path(__file__).resolve().parent
STATIC = HERE / "static"
DEFAULT_BUNDLE = HERE / "node_modules" / "botframework-webchat" / "dist" / "webchat.js"

# The page's own files, by name: a fixed table rather than a path from the URL.
_ASSETS = {"chat.js": "text/javascript; charset=utf-8", "chat.css": "text/css; charset=utf-8"}
_PAGE_HEADERS = {
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


class ChatPage:
    def __init__(
        self,
        bot_name: str,
        config: dict[str, Any],
        bundle: Path = DEFAULT_BUNDLE,
        connect_origins: tuple[str, ...] = (),
    ) -> None:
        self.bot_name = bot_name
        self.config = config
        self.bundle = bundle
        self.csp = content_security_policy(connect_origins)

    def register(self, app: web.Application) -> None:
        app.router.add_get("/chat", self.page)
        app.router.add_get("/chat/webchat.js", self.webchat_js)
        app.router.add_get("/chat/{asset:chat\\.(?:js|css)}", self.asset)

    async def page(self, request: web.Request) -> web.Response:
        if not self.bundle.is_file():
            text = _render(
                "missing.html", bot_name=html.escape(self.bot_name), bundle=html.escape(str(self.bundle))
            )
            return web.Response(status=503, text=text, content_type="text/html", headers=_PAGE_HEADERS)
        # JSON inside <script type="application/json">: escape "<" so no text can close the tag.
        config = json.dumps(self.config, ensure_ascii=False).replace("<", "\\u003c")
        subtitle = " · ".join(t("webchat.subtitle", lang) for lang in LANGS)
        text = _render(
            "chat.html", bot_name=html.escape(self.bot_name), subtitle=html.escape(subtitle), config=config
        )
        headers = {**_PAGE_HEADERS, "Content-Security-Policy": self.csp}
        return web.Response(text=text, content_type="text/html", headers=headers)

    async def webchat_js(self, request: web.Request) -> web.StreamResponse:
        if not self.bundle.is_file():
            raise web.HTTPNotFound(text="Web Chat is not installed: run ./run.sh (npm ci in webchat/)")
        return web.FileResponse(
            self.bundle,
            headers={
                "Content-Type": "text/javascript; charset=utf-8",
                "Cache-Control": "public, max-age=3600",
            },
        )

    async def asset(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["asset"]
        return web.FileResponse(
            STATIC / name, headers={"Content-Type": _ASSETS[name], "Cache-Control": "no-cache"}
        )


def content_security_policy(connect_origins: tuple[str, ...]) -> str:
    """Scripts only from this app; network calls only to it and to the Direct Line the tokens name.

    Web Chat injects its styles at run time ('unsafe-inline' for styles only); cards may show
    images from anywhere on https.
    """
    connect = " ".join(("'self'", *sorted(set(connect_origins))))
    return (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data: blob: https:; font-src 'self' data:; media-src 'self' data: blob:; "
        f"connect-src {connect}; object-src 'none'; base-uri 'none'; form-action 'none'"
    )


def _render(name: str, **values: str) -> str:
    return Template((STATIC / name).read_text("utf-8")).substitute(values)
