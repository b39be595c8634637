"""Reading a JSON request body with a size cap, answering 413 / 415 / 400 instead of failing later."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from webchat.errors import ApiError


async def read_json(request: web.Request, max_bytes: int) -> Any:
    if request.content_length is not None and request.content_length > max_bytes:
        raise _too_big(max_bytes)
    if request.content_type != "application/json":
        raise ApiError(415, "BadArgument", "Content-Type must be application/json")
    # Read at most one byte past the cap, so a chunked body without Content-Length is cut short too.
    data = bytearray()
    while len(data) <= max_bytes:
        chunk = await request.content.read(max_bytes + 1 - len(data))
        if not chunk:
            break
        data.extend(chunk)
    if len(data) > max_bytes:
        raise _too_big(max_bytes)
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ApiError(400, "BadArgument", "the body is not valid JSON") from None


def _too_big(max_bytes: int) -> ApiError:
    return ApiError(413, "MessageSizeTooBig", f"the activity is larger than {max_bytes // 1024} KB")
