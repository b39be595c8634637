"""JSON errors in Direct Line's shape, and a middleware so that Web Chat API routes always answer JSON."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from aiohttp import web
from aiohttp.typedefs import Handler

from hosting.logsafe import esc

log = logging.getLogger(__name__)


class ApiError(Exception):
    """A client-facing error: Direct Line clients read `{"error": {"code", "message"}}`."""

    def __init__(
        self, status: int, code: str, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})

    def response(self) -> web.Response:
        return error_response(self.status, self.code, self.message, self.headers)


def error_response(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status, headers=headers)


def too_many_requests(retry_after: float, message: str = "too many requests, slow down") -> ApiError:
    # Retry-After is whole seconds; never 0, or clients retry at once and hit the limit again.
    seconds = max(1, int(retry_after + 0.999))
    return ApiError(429, "TooManyRequests", message, {"Retry-After": str(seconds)})


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn every failure under a Web Chat sub-application into a JSON answer.

    aiohttp's own 404 / 405 / 413 are plain text; a browser client gets a JSON 4xx it can read instead.
    """
    try:
        return await handler(request)
    except ApiError as exc:
        return exc.response()
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = {404: "NotFound", 405: "MethodNotAllowed", 413: "MessageSizeTooBig"}.get(
            exc.status, "BadArgument"
        )
        return error_response(exc.status, code, exc.reason)
    except Exception:
        log.exception("unhandled error serving %s %s", esc(request.method), esc(request.path))
        # A bug of ours, not bad input: say so honestly, in JSON, without details (they are in the log).
        return error_response(500, "ServiceError", "internal error")
