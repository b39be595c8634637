"""Cross-origin access for pages on other sites (an intranet portal) that embed the chat.

Only the origins listed in WEBCHAT_ALLOWED_ORIGINS may call the token and Direct Line endpoints
from a browser; the /chat page itself is same-origin and needs none of this.
"""

from __future__ import annotations

from collections.abc import Iterable

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from webchat.errors import error_response

# Web Chat's Direct Line client sends these; Authorization carries the token.
_ALLOWED_HEADERS = "Authorization, Content-Type, x-ms-bot-agent"


class Cors:
    def __init__(self, origins: Iterable[str]) -> None:
        self.origins = frozenset(o.strip().rstrip("/") for o in origins if o.strip())

    @classmethod
    def from_setting(cls, value: str) -> Cors:
        return cls(value.split(","))

    def headers(self, request: web.Request) -> dict[str, str]:
        origin = request.headers.get("Origin", "")
        if origin and (origin in self.origins or "*" in self.origins):
            return {"Access-Control-Allow-Origin": origin, "Vary": "Origin"}
        return {}

    async def preflight(self, request: web.Request) -> web.Response:
        allowed = self.headers(request)
        if not allowed:
            return error_response(403, "Forbidden", "origin not allowed (see WEBCHAT_ALLOWED_ORIGINS)")
        return web.Response(
            status=204,
            headers={
                **allowed,
                "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
                "Access-Control-Allow-Headers": _ALLOWED_HEADERS,
                "Access-Control-Max-Age": "600",
            },
        )

    def middleware(self) -> Middleware:
        @web.middleware
        async def cors(request: web.Request, handler: Handler) -> web.StreamResponse:
            if request.method == "OPTIONS":
                return await self.preflight(request)
            response = await handler(request)
            response.headers.update(self.headers(request))
            return response

        return cors
