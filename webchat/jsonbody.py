"""Reading a JSON request body with a size, depth and time cap, answering 413 / 415 / 400 / 408
instead of failing later (the depth cap: hosting/capped_json.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from hosting.capped_json import loads
from webchat.errors import ApiError


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
