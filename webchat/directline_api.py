"""Direct Line 3.0 over HTTP, as Web Chat's client uses it with `webSocket: false` (polling).

POST /conversations, GET /conversations/{id}, POST and GET /conversations/{id}/activities
(?watermark=), POST /tokens/refresh; every request carries `Authorization: Bearer <token>`.
Mounted at /v3/directline only in the unauthenticated local mode (see wiring.py).
"""

from __future__ import annotations

from aiohttp import web

from hosting.client_address import client_of
from webchat.activities import locale_of
from webchat.connector_api import service_url
from webchat.cors import Cors
from webchat.errors import ApiError, json_errors
from webchat.jsonbody import read_json
from webchat.local_directline import LocalDirectLine

PREFIX = "/v3/directline"


def directline_app(service: LocalDirectLine, cors: Cors, port: int) -> web.Application:
    # cors outermost, so error answers carry its headers too and a page on another site can read them.
    api = web.Application(middlewares=[cors.middleware(), json_errors])
    handler = _DirectLineHandler(service, port)
    api.router.add_post("/conversations", handler.start_conversation)
    api.router.add_get("/conversations/{conversation_id}", handler.reconnect)
    api.router.add_post("/conversations/{conversation_id}/activities", handler.post_activity)
    api.router.add_get("/conversations/{conversation_id}/activities", handler.get_activities)
    api.router.add_post("/tokens/refresh", handler.refresh_token)
    return api


class _DirectLineHandler:
    def __init__(self, service: LocalDirectLine, port: int) -> None:
        self._service = service
        self._port = port

    async def start_conversation(self, request: web.Request) -> web.Response:
        claims = self._service.authorize(request.headers.get("Authorization"))
        _, created = await self._service.start(
            claims,
            client_of(request),
            service_url(request, self._service, self._port),
            locale_of(request.headers.get("Accept-Language")),
        )
        body = self._service.refresh(claims)
        # No streamUrl: this endpoint only polls (the page creates Direct Line with webSocket: false).
        return web.json_response(body, status=201 if created else 200)

    async def reconnect(self, request: web.Request) -> web.Response:
        claims = self._service.authorize(request.headers.get("Authorization"), self._conversation_id(request))
        self._service.conversation(claims)
        return web.json_response(self._service.refresh(claims))

    async def post_activity(self, request: web.Request) -> web.Response:
        claims = self._service.authorize(request.headers.get("Authorization"), self._conversation_id(request))
        body = await read_json(request, self._service.limits.max_activity_bytes)
        activity_id = await self._service.post(claims, body, service_url(request, self._service, self._port))
        return web.json_response({"id": activity_id})

    async def get_activities(self, request: web.Request) -> web.Response:
        claims = self._service.authorize(request.headers.get("Authorization"), self._conversation_id(request))
        conversation = self._service.conversation(claims)
        raw = request.query.get("watermark", "")
        # Web Chat's first poll sends an empty watermark: everything from the start.
        if raw and not (raw.isascii() and raw.isdigit() and len(raw) <= 9):
            raise ApiError(400, "BadArgument", "watermark must be a non-negative integer")
        activities, watermark = self._service.store.since(conversation, int(raw or 0))
        return web.json_response({"activities": activities, "watermark": str(watermark)})

    async def refresh_token(self, request: web.Request) -> web.Response:
        claims = self._service.authorize(request.headers.get("Authorization"))
        return web.json_response(self._service.refresh(claims))

    @staticmethod
    def _conversation_id(request: web.Request) -> str:
        return request.match_info["conversation_id"]
