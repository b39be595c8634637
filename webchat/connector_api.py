"""The Bot Connector routes the bot replies to in local Direct Line conversations.

The bot posts `{serviceUrl}/v3/conversations/{id}/activities[/{replyToId}]` as on any channel; the
serviceUrl handed to it is this app's own address plus a per-process key, so only this process can
post here and the replies land in the conversation's activity list.
"""

from __future__ import annotations

import hmac
from typing import Any

from aiohttp import web

from webchat.errors import ApiError, json_errors
from webchat.jsonbody import read_json
from webchat.local_directline import LocalDirectLine

PREFIX = "/webchat/connector"


def service_url(request: web.Request, service: LocalDirectLine, fallback_port: int) -> str:
    """The connector address as the bot should call it: the very socket this request came in on
    (never the Host header, which the client chooses)."""
    host, port = _local_address(request) or ("127.0.0.1", fallback_port)
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}{PREFIX}/{service.connector_key}"


def connector_app(service: LocalDirectLine) -> web.Application:
    api = web.Application(middlewares=[json_errors])
    handler = _ConnectorHandler(service)
    api.router.add_post("/{key}/v3/conversations/{conversation_id}/activities", handler.post)
    api.router.add_post("/{key}/v3/conversations/{conversation_id}/activities/{activity_id}", handler.post)
    return api


class _ConnectorHandler:
    def __init__(self, service: LocalDirectLine) -> None:
        self._service = service

    async def post(self, request: web.Request) -> web.Response:
        key = request.match_info["key"]
        local = _local_address(request)
        # The key proves the caller was handed the serviceUrl; the address check that it runs on this
        # machine, so a leaked key alone does not let another host post.
        if not hmac.compare_digest(
            key.encode("utf-8", "surrogatepass"), self._service.connector_key.encode()
        ) or (local is not None and request.remote != local[0]):
            raise ApiError(404, "NotFound", "not found")
        body: Any = await read_json(request, self._service.limits.max_reply_bytes)
        activity_id = self._service.receive_reply(request.match_info["conversation_id"], body)
        return web.json_response({"id": activity_id})


def _local_address(request: web.Request) -> tuple[str, int] | None:
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    if isinstance(sockname, tuple) and len(sockname) >= 2:
        return str(sockname[0]), int(sockname[1])
    return None
