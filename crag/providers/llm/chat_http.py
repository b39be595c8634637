"""POST /chat/completions over one aiohttp session, without the SDK's request machinery.

Under many concurrent turns the openai SDK's request building (httpx URL and header merging) and
response parsing (typed models) cost 0.8 ms of CPU per call beyond the HTTP itself (measured against
the fake server: 1.22-1.27 ms a call through `client.post`, 0.40-0.44 ms posted directly); a turn
makes twelve such calls, and that was a quarter of the app's CPU under tools/bench/bench_load.py. Chat
calls, plain and streamed (server-sent events read line by line, where the SDK built typed models of
each event), are posted here; embeddings stay with the SDK. Retries follow the SDK's policy:
connection errors, timeouts, 408, 409, 429 and 5xx, exponential backoff from 0.5 s up to 8 s with
jitter, Retry-After (or retry-after-ms) honoured up to 60 s.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp

from crag.outbound.http_proxy import proxy_options
from crag.outbound.http_retry import backoff, retry_after

RETRYABLE = frozenset({408, 409, 429})
INITIAL_DELAY = 0.5
MAX_DELAY = 8.0
MAX_RETRY_AFTER = 60.0

Headers = Callable[[], Awaitable[Mapping[str, str]]]


class ChatHttpError(Exception):
    """The call failed for good: `kind` is "timeout", "connection" or "status" (with `status` and
    the server's error message, which may quote the request's parameters but never the key)."""

    def __init__(self, kind: str, status: int = 0, message: str = "") -> None:
        super().__init__(message or kind)
        self.kind = kind
        self.status = status
        self.message = message


class ChatEndpoint:
    def __init__(self, url: str, headers: Headers, max_retries: int, timeout: float) -> None:
        self._url = url
        self._headers = headers
        self._max_retries = max_retries
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        self._proxy = proxy_options(url)  # HTTP(S)_PROXY, NO_PROXY: as httpx under the SDK did

    async def post(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The parsed JSON reply, or ChatHttpError once the retries are spent."""

        async def read(response: aiohttp.ClientResponse) -> dict[str, Any]:
            reply = await response.json(content_type=None)  # invalid JSON: retried, as a lost reply
            if not isinstance(reply, dict):
                raise ChatHttpError("status", 200, "the reply is not a JSON object")
            return reply

        return await self._send(body, self._timeout, read)

    async def stream(
        self, body: Mapping[str, Any], on_delta: Callable[[str], Awaitable[None]]
    ) -> dict[str, Any]:
        """A streamed reply (server-sent events): on_delta hears each piece of the content as it
        comes; returns the usage, when the server sends it. Retried as post() is until the reply
        starts; a stream that breaks off after it started is not retried (its text was heard)."""

        async def read(response: aiohttp.ClientResponse) -> dict[str, Any]:
            try:
                return await _events(response, on_delta)
            except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
                raise ChatHttpError("connection", message=type(exc).__name__) from None

        # No limit on the whole reply (an answer streams for as long as it is written), only on
        # connecting and on each wait for more of it.
        per_read = self._timeout.total
        return await self._send(body, aiohttp.ClientTimeout(sock_connect=per_read, sock_read=per_read), read)

    async def _send(
        self,
        body: Mapping[str, Any],
        timeout: aiohttp.ClientTimeout,
        read: Callable[[aiohttp.ClientResponse], Awaitable[dict[str, Any]]],
    ) -> dict[str, Any]:
        """POST with the SDK's retry policy; a 200 is handed to `read`."""
        for attempt in range(self._max_retries + 1):
            last = attempt == self._max_retries
            try:
                async with self._open().post(
                    self._url, json=body, headers=await self._headers(), timeout=timeout, **self._proxy
                ) as response:
                    if response.status == 200:
                        return await read(response)
                    text = await response.text()
                    if last or not (response.status in RETRYABLE or response.status >= 500):
                        raise ChatHttpError("status", response.status, _error_message(text))
                    wait = retry_after(response.headers, MAX_RETRY_AFTER)
                    delay = backoff(attempt, INITIAL_DELAY, MAX_DELAY) if wait is None else wait
            except TimeoutError:
                if last:
                    raise ChatHttpError("timeout") from None
                delay = backoff(attempt, INITIAL_DELAY, MAX_DELAY)
            except (aiohttp.ClientError, json.JSONDecodeError, UnicodeDecodeError) as exc:
                if last:
                    raise ChatHttpError("connection", message=type(exc).__name__) from None
                delay = backoff(attempt, INITIAL_DELAY, MAX_DELAY)
            await asyncio.sleep(delay)
        raise ChatHttpError("connection")  # not reached: the last attempt returns or raises

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # No connection cap of its own (aiohttp's default is 100): LlmClient's semaphore bounds
            # the calls in flight, and a second, lower bound here queued them unseen under load.
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0), cookie_jar=aiohttp.DummyCookieJar()
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


async def _events(
    response: aiohttp.ClientResponse, on_delta: Callable[[str], Awaitable[None]]
) -> dict[str, Any]:
    """Read `data:` lines until [DONE]: the content deltas to on_delta, once per read from the socket
    (an event is a token or so: one callback per event cost more than the parsing); the usage returned."""
    usage: dict[str, Any] = {}
    pending = b""
    async for data in response.content.iter_any():
        *lines, pending = (pending + data).split(b"\n")
        pieces: list[str] = []
        done = False
        for raw in lines:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue  # blank separators, comments, event names
            payload = line[5:].strip()
            if payload == b"[DONE]":
                done = True
                break
            event = json.loads(payload)
            if not isinstance(event, dict):
                raise ValueError("an event is not a JSON object")
            if isinstance(event.get("error"), dict):  # a failure reported inside the stream
                raise ChatHttpError("status", 200, str(event["error"].get("message", "")))
            if isinstance(event.get("usage"), dict):
                usage = event["usage"]
            for choice in event.get("choices") or ():
                delta = (choice.get("delta") or {}).get("content") if isinstance(choice, dict) else None
                if isinstance(delta, str) and delta:
                    pieces.append(delta)
        if pieces:
            await on_delta("".join(pieces))
        if done:
            break
    return usage


def _error_message(text: str) -> str:
    try:
        error = json.loads(text).get("error", {})
        return str(error.get("message", "")) if isinstance(error, dict) else str(error)
    except (ValueError, AttributeError):
        return ""
