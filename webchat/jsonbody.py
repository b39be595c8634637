"""Reading a JSON request body with a size, depth and time cap, answering 413 / 415 / 400 / 408
instead of failing later."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from aiohttp import web

from webchat.errors import ApiError

# Deeper JSON than any activity needs (Teams' and Adaptive Cards' nest about ten levels); Python's
# parser raises RecursionError at about a thousand, and code walking the result would too.
MAX_JSON_DEPTH = 64
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def too_deep(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the arrays and objects of the JSON `text` nest more than `limit` levels (checked
    before parsing, so a 5,000-level body costs a scan, not a RecursionError)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = deepest = 0
    for char in _NOT_BRACKET.sub("", _STRING.sub("", text)):
        depth += 1 if char in "[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                return True
    return False


def loads(raw: bytes, limit: int = MAX_JSON_DEPTH) -> Any:
    """Parse a request body: ValueError (or UnicodeDecodeError) if it is not JSON or nests too deep."""
    text = raw.decode("utf-8")
    if too_deep(text, limit):
        raise ValueError(f"JSON nested deeper than {limit} levels")
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


async def read_json(request: web.Request, max_bytes: int, timeout: float = 15.0) -> Any:
    if request.content_length is not None and request.content_length > max_bytes:
        raise _too_big(max_bytes)
    if request.content_type != "application/json":
        raise ApiError(415, "BadArgument", "Content-Type must be application/json")
    # Read at most one byte past the cap, so a chunked body without Content-Length is cut short too.
    data = bytearray()
    try:
        async with asyncio.timeout(timeout):  # a body sent byte by byte would hold the handler
            while len(data) <= max_bytes:
                chunk = await request.content.read(max_bytes + 1 - len(data))
                if not chunk:
                    break
                data.extend(chunk)
    except TimeoutError:
        raise ApiError(408, "RequestTimeout", "the body took too long to arrive") from None
    if len(data) > max_bytes:
        raise _too_big(max_bytes)
    try:
        return loads(bytes(data))
    except ValueError:  # UnicodeDecodeError is one
        raise ApiError(400, "BadArgument", "the body is not valid JSON (or nests too deeply)") from None


def _too_big(max_bytes: int) -> ApiError:
    return ApiError(413, "MessageSizeTooBig", f"the activity is larger than {max_bytes // 1024} KB")
