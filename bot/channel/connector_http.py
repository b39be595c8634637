"""The bot's replies posted straight over aiohttp, with the Bot Connector SDK's body, headers and
retries: botframework-connector 4.17 gives up on a reply Teams throttles (a 429, not retried) and walks each
reply twice, as tests/bot/channel/test_connector_http.py shows on its own path
(test_botframework_417_gives_up_on_a_throttled_reply, test_botframework_417_walks_each_reply_twice).

Under load (tools/bench/bench_load.py: 50 conversations) sending a reply through botframework-connector was
a sixth of the app's event-loop time: msrest serializes the Activity by round-tripping it through its
Deserializer and Serializer (the Adaptive Card walked twice, two-thirds of that time), then hands the
POST to `requests` in a worker thread. Here the Activity's models become dicts in one walk over
their attribute maps, their JSON payloads (the card, channelData, entities' data) go to json.dumps as
they are, and the POST is made on the event loop's own HTTP client. For what the bot sends this is
msrest's JSON (tests/bot/channel/test_connector_http.py compares them on the bot's own replies); it differs
only where msrest's is wrong, a str subclass or a tuple inside a payload (msrest writes str() of it).

Kept from the SDK: the URL (the client's own format_url), the headers (Accept, Content-Type,
x-ms-conversation-id, User-Agent, and the Bearer token from the client's credentials, which
bot/channel/connector_cache.py has fetched for the turn), the 100 s timeout, the retries of msrest's policy
(3, on connection errors, timeouts, 408 and 5xx except 501 and 505, backoff from 0.8 s, Retry-After
honoured), the ResourceResponse returned and the ErrorResponseException raised. Added: a 429 is
retried after the Retry-After Teams sends with it, as Teams asks of bots it throttles.

An activity this walk cannot render exactly (a model field holding a dict, which msrest would turn
into the model first) and any call with options go through the SDK as before.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
from collections.abc import Awaitable, Callable
from enum import Enum
from typing import Any
from urllib.parse import quote

import aiohttp
import requests
from botbuilder.schema import Activity, ResourceResponse
from botframework.connector import ConnectorClient
from botframework.connector.models import ErrorResponseException
from msrest.exceptions import ClientRequestError
from msrest.serialization import Model, Serializer

from crag.outbound.http_proxy import proxy_options
from crag.outbound.http_retry import backoff, retry_after

log = logging.getLogger(__name__)

MAX_RETRIES = 3  # msrest's ClientRetryPolicy
INITIAL_DELAY = 0.8  # its backoff factor
MAX_DELAY = 90.0
MAX_RETRY_AFTER = 60.0
_NOT_RETRIED_5XX = frozenset({501, 505})
_REPLY_URL = "/v3/conversations/{conversationId}/activities/{activityId}"
_SEND_URL = "/v3/conversations/{conversationId}/activities"


class NotPlain(Exception):
    """The activity holds something only msrest renders the way msrest does."""


def activity_json(model: Model) -> dict[str, Any]:
    """The JSON msrest's Serializer.body(model, type) gives for a model whose fields hold models,
    lists, dicts and plain values; NotPlain for anything else."""
    out: dict[str, Any] = {}
    for attr, spec in type(model)._attribute_map.items():
        value = getattr(model, attr, None)
        if value is not None:
            out[spec["key"]] = _typed(value, spec["type"])
    return out


def _typed(value: Any, kind: Any) -> Any:
    if not isinstance(kind, str):
        raise NotPlain(f"type {kind!r}")
    if kind.startswith("["):
        if not isinstance(value, list):
            raise NotPlain("a list field holds no list")
        return [None if v is None else _typed(v, kind[1:-1]) for v in value]
    if kind.startswith("{"):
        if not isinstance(value, dict):
            raise NotPlain("a dict field holds no dict")
        return {_text(k): None if v is None else _typed(v, kind[1:-1]) for k, v in value.items()}
    if kind == "object":
        return value  # JSON as it is; json.dumps asks payload_json for anything else
    if kind == "str":
        return _text(value)
    if kind in ("int", "long"):
        return int(value)
    if kind == "float":
        return float(value)
    if kind == "bool":
        return bool(value)
    if kind == "iso-8601" and isinstance(value, datetime.datetime):
        return Serializer.serialize_iso(value)  # type: ignore[no-untyped-call]  # msrest is unannotated here
    if kind[:1].isupper() and isinstance(value, Model):  # a model type: the field holds one
        return activity_json(value)
    raise NotPlain(f"{type(value).__name__} in a {kind} field")


def _text(value: Any) -> str:
    # msrest's serialize_unicode: an enum's value, a str as it is, anything else as str().
    if isinstance(value, Enum):
        return str(value.value)
    return value if isinstance(value, str) else str(value)


def payload_json(value: Any) -> Any:
    """json.dumps' fallback for a payload value JSON has no form for: a model inside it, as msrest
    renders one; anything else is msrest's own business."""
    if isinstance(value, Model):
        return activity_json(value)
    raise NotPlain(f"{type(value).__name__} in an object field")


class DirectConversations:
    """A ConnectorClient's `conversations`, with the three calls that carry the bot's replies posted
    here; every other call (and any call with options) goes to the SDK's."""

    def __init__(self, client: ConnectorClient, session: Callable[[], aiohttp.ClientSession]) -> None:
        self._client = client
        self._sdk = client.conversations
        self._session = session
        self._proxy = proxy_options(client.config.base_url)  # one service URL: one origin

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sdk, name)

    async def reply_to_activity(
        self, conversation_id: str, activity_id: str, activity: Activity, **options: Any
    ) -> ResourceResponse | None:
        sdk = self._sdk.reply_to_activity
        if options:
            return await sdk(conversation_id, activity_id, activity, **options)
        url = self._url(_REPLY_URL, conversation_id, activity_id)
        return await self._send(
            "POST", url, conversation_id, activity, lambda: sdk(conversation_id, activity_id, activity)
        )

    async def send_to_conversation(
        self, conversation_id: str, activity: Activity, **options: Any
    ) -> ResourceResponse | None:
        sdk = self._sdk.send_to_conversation
        if options:
            return await sdk(conversation_id, activity, **options)
        url = self._url(_SEND_URL, conversation_id)
        return await self._send("POST", url, None, activity, lambda: sdk(conversation_id, activity))

    async def update_activity(
        self, conversation_id: str, activity_id: str, activity: Activity, **options: Any
    ) -> ResourceResponse | None:
        sdk = self._sdk.update_activity
        if options:
            return await sdk(conversation_id, activity_id, activity, **options)
        url = self._url(_REPLY_URL, conversation_id, activity_id)
        return await self._send(
            "PUT", url, None, activity, lambda: sdk(conversation_id, activity_id, activity)
        )

    def _url(self, template: str, conversation_id: str, activity_id: str | None = None) -> str:
        # Quoted and joined to the service URL as the SDK does (Serializer.url, format_url).
        ids = {"conversationId": quote(str(conversation_id), safe="")}
        if activity_id is not None:
            ids["activityId"] = quote(str(activity_id), safe="")
        url: str = self._client._client.format_url(template, **ids)
        return url

    async def _send(
        self,
        method: str,
        url: str,
        conversation_id: str | None,
        activity: Activity,
        sdk: Callable[[], Awaitable[Any]],
    ) -> ResourceResponse | None:
        try:
            body = json.dumps(activity_json(activity), ensure_ascii=False, default=payload_json).encode()
        except NotPlain as exc:
            log.debug("reply sent through the SDK: %s", exc)
            return await sdk()
        headers = {
            "Accept": "application/json",
            "Content-Type": "application/json; charset=utf-8",
            "User-Agent": self._client.config.user_agent,
            **self._authorization(),
        }
        if conversation_id is not None:  # the SDK names the conversation in a reply's headers only
            headers["x-ms-conversation-id"] = conversation_id
        timeout = aiohttp.ClientTimeout(total=self._client.config.connection.timeout)
        for attempt in range(MAX_RETRIES + 1):
            last = attempt == MAX_RETRIES
            try:
                async with self._session().request(
                    method, url, data=body, headers=headers, timeout=timeout, **self._proxy
                ) as response:
                    raw = await response.read()
                    if response.status in (200, 201, 202):
                        return _resource(raw)
                    if last or not _retried(response.status):
                        raise ErrorResponseException(self._sdk._deserialize, _as_requests(response, raw, url))
                    wait = retry_after(response.headers, MAX_RETRY_AFTER)
            except (aiohttp.ClientError, TimeoutError) as exc:
                if last:
                    raise ClientRequestError(f"Error occurred in request., {type(exc).__name__}") from exc
                wait = None
            await asyncio.sleep(wait if wait is not None else _delay(attempt))
        raise ClientRequestError("not reached")  # the last attempt returns or raises

    def _authorization(self) -> dict[str, str]:
        # The credentials' own signing (AppCredentials.signed_session) on a stand-in for the requests
        # session it expects: a token for an app id (cached by MSAL, fetched for this turn in
        # bot/channel/connector_cache.py), nothing without one (the Emulator, local use).
        credentials = self._client.config.credentials
        holder = _Headers()
        if credentials is not None and hasattr(credentials, "signed_session"):
            credentials.signed_session(holder)
        return holder.headers


class _Headers:
    def __init__(self) -> None:
        self.headers: dict[str, str] = {}


def _delay(attempt: int) -> float:
    # urllib3 (under msrest) retries the first failure at once, then backs off.
    return 0.0 if attempt == 0 else backoff(attempt - 1, INITIAL_DELAY, MAX_DELAY)


def _retried(status: int) -> bool:
    return status in (408, 429) or (status >= 500 and status not in _NOT_RETRIED_5XX)


def _resource(raw: bytes) -> ResourceResponse | None:
    # An empty body (some channels) is no resource: the adapter then uses the activity's own id.
    if not raw.strip():
        return None
    try:
        data = json.loads(raw)
    except ValueError:  # delivered (2xx) all the same: a body we cannot read names no resource
        log.debug("unreadable body in the Bot Connector's answer to a reply")
        return None
    if not isinstance(data, dict):
        return None
    return ResourceResponse(id=data.get("id"))  # its only field


def _as_requests(response: aiohttp.ClientResponse, raw: bytes, url: str) -> requests.Response:
    """The failed response as msrest's ErrorResponseException reads it (a requests.Response)."""
    out = requests.Response()
    out.status_code = response.status
    out.reason = response.reason or ""
    out.headers.update(response.headers)
    out._content = raw
    out.url = url
    return out
