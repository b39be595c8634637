"""POST /api/messages, the Bot Framework's endpoint: not a work-around itself, but the checks every
activity passes before botbuilder 4.17's CloudAdapter.process sees it, because that answers several
client errors with a 500
(tests/bot/test_emulator_protocol.py::test_malformed_http_requests_are_client_errors,
tests/bot/test_http_guards.py::test_authentication_is_enforced_with_an_app_id), then that call.

Besides those (a missing Content-Type is a KeyError in the SDK, a body that is not JSON a
JSONDecodeError, a malformed bearer token an exception from deep in its token parsing), the checks
refuse what the SDK would accept and should not: a body trickled in forever
(tests/test_slow_clients.py), JSON nested thousands deep and a conversation id that would forge log
lines (tests/bot/test_bad_input.py), a reply posted wherever an unauthenticated caller points
(tests/test_local_mode.py::test_replies_go_only_to_loopback_service_urls). Each check's comment says
which.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

import jwt
from aiohttp import web
from botbuilder.core import Bot
from botbuilder.integration.aiohttp import CloudAdapter
from botbuilder.schema import Activity
from msrest.exceptions import DeserializationError  # type: ignore[attr-defined]  # msrest re-exports azure-core's

from bot.channel.auth import AuthUnavailable
from hosting.app_settings import BotSettings
from hosting.capped_json import loads as load_json
from hosting.logsafe import esc
from hosting.loopback_addresses import is_loopback_url

log = logging.getLogger(__name__)

_BEARER_JWT = re.compile(r"^Bearer [A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$")
# Channels' conversation ids are printable ASCII; the SDK sends the id in a header, which refuses others.
_CONVERSATION_ID = re.compile(r"^[\x21-\x7e]+$")


class Refused(Exception):
    """A client error answered here, as `{"error": ...}` with its status."""

    def __init__(self, status: int, error: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.headers = dict(headers or {})

    def response(self) -> web.Response:
        return web.json_response({"error": self.error}, status=self.status, headers=self.headers)


def json_content_type(request: web.Request) -> None:
    # The SDK reads request.headers["Content-Type"]: without one, a KeyError and a 500.
    if "application/json" not in request.headers.get("Content-Type", ""):
        raise Refused(415, "Content-Type must be application/json")


async def json_body(request: web.Request, timeout: float) -> Any:
    """The parsed body. The SDK's request.json() has no deadline (a body sent byte by byte holds the
    request open), raises JSONDecodeError (a 500) on what is not JSON, and recurses into any depth."""
    try:
        async with asyncio.timeout(timeout):
            raw = await request.read()
        return load_json(raw)  # nesting capped: parsed before authentication
    except web.HTTPRequestEntityTooLarge:
        raise Refused(413, "activity too large") from None
    except TimeoutError:
        raise Refused(408, "the body took too long to arrive") from None
    except ValueError:  # UnicodeDecodeError is one
        raise Refused(400, "body is not valid JSON (or nests too deeply)") from None


def is_activity(body: Any, request: web.Request, settings: BotSettings) -> None:
    # A list or a number: the SDK's Activity().deserialize raises on it (a 500).
    if not isinstance(body, dict) or not isinstance(body.get("type"), str):
        raise Refused(400, "body is not an activity")


def has_service_url_and_conversation(body: Any, request: web.Request, settings: BotSettings) -> None:
    # The SDK builds its reply connector from these; without them the turn fails with a 500.
    if not isinstance(body.get("serviceUrl"), str) or not isinstance(body.get("conversation"), dict):
        raise Refused(400, "activity lacks serviceUrl or conversation")


def has_ascii_conversation_id(body: Any, request: web.Request, settings: BotSettings) -> None:
    # The SDK needs it for state and replies (and a line break in it would forge log lines).
    conversation_id = body["conversation"].get("id")
    if not isinstance(conversation_id, str) or not _CONVERSATION_ID.match(conversation_id):
        raise Refused(400, "conversation.id must be a non-empty ASCII string")


def deserializes(body: Any, request: web.Request, settings: BotSettings) -> None:
    # A field of the wrong type: msrest's DeserializationError (or a TypeError) in the SDK, a 500.
    try:
        Activity().deserialize(body)
    except (DeserializationError, ValueError, TypeError, AttributeError):
        raise Refused(400, "body is not a valid activity") from None


def replies_to_loopback_when_local(body: Any, request: web.Request, settings: BotSettings) -> None:
    # Unauthenticated, the bot would post its replies wherever a caller points it (SSRF).
    if not settings.app_id and not is_loopback_url(body["serviceUrl"]):
        log.warning(
            "refused an activity for serviceUrl %s (local mode: loopback only)", esc(body["serviceUrl"])
        )
        raise Refused(403, "without MicrosoftAppId the bot replies only to a loopback serviceUrl")


def has_bearer_token(body: Any, request: web.Request, settings: BotSettings) -> None:
    # The SDK answers a malformed token with 500; a caller without a valid token gets 401.
    if settings.app_id and not _BEARER_JWT.match(request.headers.get("Authorization", "")):
        raise Refused(401, "a Bot Framework bearer token is required")


# In this order: each check may rely on the ones before it.
ACTIVITY_CHECKS: tuple[Callable[[Any, web.Request, BotSettings], None], ...] = (
    is_activity,
    has_service_url_and_conversation,
    has_ascii_conversation_id,
    deserializes,
    replies_to_loopback_when_local,
    has_bearer_token,
)


class MessagesRoute:
    def __init__(self, settings: BotSettings, adapter: CloudAdapter, bot: Bot) -> None:
        self._settings = settings
        self._adapter = adapter
        self._bot = bot

    async def post(self, request: web.Request) -> web.StreamResponse:
        try:
            json_content_type(request)
            body = await json_body(request, self._settings.http_client_timeout)
            for check in ACTIVITY_CHECKS:
                check(body, request, self._settings)
            return await self._process(request)
        except Refused as refused:
            return refused.response()

    async def _process(self, request: web.Request) -> web.StreamResponse:
        try:
            response = await self._adapter.process(request, self._bot)
        except (PermissionError, jwt.PyJWTError, web.HTTPUnauthorized):
            raise Refused(401, "invalid bearer token") from None
        except AuthUnavailable:  # inbound signing keys, or the bot's own token for replying
            raise Refused(
                503, "authentication services cannot be reached; try again later", {"Retry-After": "30"}
            ) from None
        return response or web.Response(status=201)
