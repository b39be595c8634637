"""Every request that fails in our code gets a JSON 500 without details; the details (traceback,
method, path) go to the log."""

from __future__ import annotations

import logging

from aiohttp import web
from aiohttp.typedefs import Handler

from hosting.logsafe import esc

log = logging.getLogger(__name__)


@web.middleware
async def internal_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except Exception:
        log.exception("unhandled error serving %s %s", esc(request.method), esc(request.path))
        return web.json_response({"error": "internal error"}, status=500)
