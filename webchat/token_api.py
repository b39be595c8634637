"""POST /api/directline/token: what the chat page (or an intranet page) calls to get a token.

With DIRECT_LINE_SECRET: a token from Azure's Direct Line for a random `dl_` user. Without it, in
the local mode: a token of the local Direct Line. Rate-limited per client IP, since each call may
cost a request to Direct Line.
"""

from __future__ import annotations

import logging

from aiohttp import web

from hosting.client_address import client_of
from hosting.shared_limits import SharedRateLimit
from webchat.cors import Cors
from webchat.directline_api import PREFIX as LOCAL_PREFIX
from webchat.errors import ApiError, too_many_requests
from webchat.ids import new_user_id
from webchat.local_directline import LocalDirectLine
from webchat.token_exchange import DirectLineTokenClient, TokenExchangeError

log = logging.getLogger(__name__)

PATH = "/api/directline/token"

NEEDS_SECRET = "Web Chat needs DIRECT_LINE_SECRET when the bot has a MicrosoftAppId (see README, Web Chat)"


class TokenApi:
    def __init__(
        self,
        cors: Cors,
        limiter: SharedRateLimit,
        exchange: DirectLineTokenClient | None,
        local: LocalDirectLine | None,
        public_base_url: str = "",
        not_configured: str = NEEDS_SECRET,
    ) -> None:
        self._not_configured = not_configured
        self._cors = cors
        self._limiter = limiter
        self._exchange = exchange
        self._local = local
        self._public_base_url = public_base_url.rstrip("/")

    def register(self, app: web.Application) -> None:
        app.router.add_post(PATH, self.post)
        app.router.add_route("OPTIONS", PATH, self._cors.preflight)

    async def post(self, request: web.Request) -> web.Response:
        try:
            response = await self._token(request)
        except ApiError as exc:
            response = exc.response()
        response.headers.update(self._cors.headers(request))
        response.headers["Cache-Control"] = "no-store"  # a token is for one browser, never for a cache
        return response

    async def _token(self, request: web.Request) -> web.Response:
        # The client's address: X-Forwarded-For only from a trusted proxy (hosting/client_address.py).
        wait = await self._limiter.acquire(client_of(request))
        if wait:
            raise too_many_requests(wait, "too many token requests; try again later")
        if self._exchange is not None:
            user_id = new_user_id()
            try:
                token = await self._exchange.generate(user_id)
            except TokenExchangeError as exc:
                log.warning("Direct Line token exchange failed: %s", exc)
                raise ApiError(502, "DirectLineUnavailable", "could not get a Direct Line token") from None
            return web.json_response({**token, "userId": user_id, "domain": self._exchange.endpoint})
        if self._local is not None:
            base = self._public_base_url or f"{request.scheme}://{request.host}"
            return web.json_response({**self._local.issue_token(), "domain": base + LOCAL_PREFIX})
        raise ApiError(503, "NotConfigured", self._not_configured)
