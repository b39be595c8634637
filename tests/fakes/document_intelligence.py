"""An Azure AI Document Intelligence stand-in on 127.0.0.1: the analyze long-running operation the
Python SDK drives (api-version 2024-11-30).

`POST /documentintelligence/documentModels/{model}:analyze` takes the document's bytes and answers
202 with an Operation-Location; `GET .../analyzeResults/{id}` answers "running" for `polls_running`
polls, then "succeeded" with `analyzeResult.content` (the `markdown` given). Every request needs the
`Ocp-Apim-Subscription-Key` header (else 401, as the service answers) and is recorded in `requests`.
`fail_status` answers every analyze request with that status; `never_finish` keeps the operation
running; `fail_operation` (an error code) makes it end "failed"; `hang_s` delays the analyze
request's answer.
"""

from __future__ import annotations

import asyncio
import itertools
import re
from dataclasses import dataclass

from aiohttp import web

from crag.eval.loopback import LoopbackServer

_ANALYZE = re.compile(r"^/documentintelligence/documentModels/(?P<model>[^/:]+):analyze$")
_RESULT = re.compile(
    r"^/documentintelligence/documentModels/(?P<model>[^/:]+)/analyzeResults/(?P<id>[\w-]+)$"
)


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes


class FakeDocumentIntelligence(LoopbackServer):
    def __init__(self, key: str = "test-di-key", markdown: str = "# Scanned\n\nText.") -> None:
        super().__init__()
        self.key = key
        self.markdown = markdown
        self.polls_running = 1  # polls answered "running" before "succeeded"
        self.fail_status: int | None = None
        self.never_finish = False
        self.fail_operation: str | None = None
        self.hang_s = 0.0
        self.requests: list[RecordedRequest] = []
        self._polls: dict[str, int] = {}
        self._ids = itertools.count(1)

    client_max_size = 64 * 1024 * 1024

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{tail:.*}", self._dispatch)

    @property
    def analyzed(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.method == "POST"]

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.requests.append(
            RecordedRequest(request.method, request.path, dict(request.query), dict(request.headers), body)
        )
        if request.headers.get("Ocp-Apim-Subscription-Key") != self.key:
            return _error(401, "401", "Access denied due to invalid subscription key or wrong API endpoint.")
        if "api-version" not in request.query:
            return _error(404, "404", "Resource not found")
        if request.method == "POST" and (match := _ANALYZE.match(request.path)):
            return await self._analyze(request, match["model"])
        if request.method == "GET" and (match := _RESULT.match(request.path)):
            return self._result(match["model"], match["id"], request.query["api-version"])
        return _error(404, "404", "Resource not found")

    async def _analyze(self, request: web.Request, model: str) -> web.StreamResponse:
        if self.hang_s:
            await asyncio.sleep(self.hang_s)
        if self.fail_status is not None:
            return _error(self.fail_status, "InternalServerError", "An unexpected error occurred.")
        if request.content_type != "application/octet-stream":
            return _error(400, "InvalidRequest", f"unexpected content type {request.content_type}")
        operation = str(next(self._ids))
        self._polls[operation] = 0
        location = (
            f"{self.url}/documentintelligence/documentModels/{model}/analyzeResults/{operation}"
            f"?api-version={request.query['api-version']}"
        )
        # retry-after-ms keeps the SDK's polling quick here (the real service says seconds).
        return web.Response(status=202, headers={"Operation-Location": location, "retry-after-ms": "20"})

    def _result(self, model: str, operation: str, api_version: str) -> web.StreamResponse:
        if operation not in self._polls:
            return _error(404, "NotFound", "operation not found")
        self._polls[operation] += 1
        headers = {"retry-after-ms": "20"}
        if self.never_finish or self._polls[operation] <= self.polls_running:
            return web.json_response({"status": "running"}, headers=headers)
        if self.fail_operation is not None:
            error = {
                "code": self.fail_operation,
                "message": "The file is corrupted or format is unsupported.",
            }
            return web.json_response({"status": "failed", "error": error}, headers=headers)
        result = {
            "apiVersion": api_version,
            "modelId": model,
            "stringIndexType": "textElements",
            "content": self.markdown,
            "contentFormat": "markdown",
            "pages": [{"pageNumber": 1, "spans": [{"offset": 0, "length": len(self.markdown)}]}],
        }
        return web.json_response(
            {
                "status": "succeeded",
                "createdDateTime": "2026-12-01T00:00:00Z",
                "lastUpdatedDateTime": "2026-12-01T00:00:01Z",
                "analyzeResult": result,
            },
            headers=headers,
        )


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status)
