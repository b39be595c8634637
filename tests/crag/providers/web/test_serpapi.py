"""The SerpAPI provider against fake SerpAPI servers on 127.0.0.1: success and every failure mode."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from pydantic import SecretStr

from crag.core.models import WebStatus
from crag.eval.loopback import serve_on_loopback
from crag.providers.web.serpapi import SerpApiSearch

SECRET = "sk-serp-THIS-MUST-NOT-LEAK"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

GOOD = {
    "search_metadata": {"status": "Success"},
    "answer_box": {
        "title": "Tokyo weather",
        "answer": "Sunny, 18°C",
        "link": "https://weather.example/tokyo",
    },
    "organic_results": [
        {"position": 1, "title": "Result one", "link": "https://one.example/", "snippet": "First snippet."},
        {"position": 2, "title": "Result two", "link": "https://two.example/", "snippet": "Second snippet."},
        {"position": 3, "title": "No link"},
    ],
    "related_questions": [
        {"question": "Is it cold?", "snippet": "Not really.", "link": "https://faq.example/cold"},
    ],
}


async def one_search(url: str, timeout_s: float, query: str, num: int) -> Any:
    client = SerpApiSearch(SecretStr(SECRET), url, timeout_s=timeout_s)
    try:
        return await client.search(query, num)
    finally:
        await client.close()


class Server:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[dict[str, str]] = []
        self.peers: list[str] = []  # the client's address and port of each request
        self.url = ""

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(dict(request.query))
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self.peers.append(str(peer))
        return await self.handler(request)


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Handler], Awaitable[Server]]]:
    runners: list[web.AppRunner] = []

    async def start(handler: Handler) -> Server:
        server = Server(handler)
        app = web.Application()
        app.router.add_get("/search", server._serve)
        runner, server.url = await serve_on_loopback(app)
        runners.append(runner)
        return server

    yield start
    for runner in runners:
        await runner.cleanup()


def _json(body: Any, status: int = 200) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.json_response(body, status=status)

    return handler


async def test_success_uses_answer_box_organic_and_related(serve: Any) -> None:
    server = await serve(_json(GOOD))
    outcome = await one_search(server.url, 3, "東京 天気", 5)
    assert outcome.status is WebStatus.OK
    assert [(r.kind, r.url) for r in outcome.results] == [
        ("answer_box", "https://weather.example/tokyo"),
        ("organic", "https://one.example/"),
        ("organic", "https://two.example/"),
        ("related_question", "https://faq.example/cold"),
    ]
    assert outcome.results[0].snippet == "Sunny, 18°C"
    sent = server.requests[0]
    assert sent["q"] == "東京 天気" and sent["engine"] == "google" and sent["api_key"] == SECRET
    assert sent["hl"] == "ja" and sent["num"] == "5"  # a Japanese query searches Japanese Google


async def test_error_body_is_a_failed_search(serve: Any, caplog: pytest.LogCaptureFixture) -> None:
    server = await serve(_json({"error": "Invalid API key. Your API key should be here: ..."}, status=401))
    outcome = await one_search(server.url, 3, "q", 5)
    assert outcome.status is WebStatus.FAILED and outcome.results == []
    assert "Invalid API key" in caplog.text and SECRET not in caplog.text


async def test_no_results_error_is_an_empty_success(serve: Any) -> None:
    server = await serve(_json({"error": "Google hasn't returned any results for this query."}))
    outcome = await one_search(server.url, 3, "zzzz", 5)
    assert outcome.status is WebStatus.OK and outcome.results == []


async def test_http_500_is_a_failed_search(serve: Any, caplog: pytest.LogCaptureFixture) -> None:
    async def boom(request: web.Request) -> web.StreamResponse:
        return web.Response(status=500, text="<html>Internal Server Error</html>")

    server = await serve(boom)
    outcome = await one_search(server.url, 3, "q", 5)
    assert outcome.status is WebStatus.FAILED and "500" in outcome.message
    assert SECRET not in caplog.text


async def test_timeout_is_a_failed_search_and_never_leaks_the_key(
    serve: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(3)
        return web.json_response(GOOD)

    caplog.set_level(logging.DEBUG)
    server = await serve(slow)
    started = asyncio.get_running_loop().time()
    outcome = await one_search(server.url, 0.5, "q", 5)
    elapsed = asyncio.get_running_loop().time() - started
    assert outcome.status is WebStatus.FAILED
    assert elapsed < 2.5  # the client's timeout is in seconds, not the default 60000
    assert SECRET not in caplog.text and SECRET not in outcome.message


async def test_unreachable_server_is_a_failed_search(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    outcome = await one_search("http://127.0.0.1:9", 1, "q", 5)
    assert outcome.status is WebStatus.FAILED
    assert SECRET not in caplog.text


async def test_searches_reuse_one_connection(serve: Any) -> None:
    # The google-search-results client opened a connection (a TLS handshake with serpapi.com) for
    # every search; the session keeps it.
    async def good(_request: web.Request) -> web.Response:
        return web.json_response(GOOD)

    server = await serve(good)
    client = SerpApiSearch(SecretStr(SECRET), server.url, timeout_s=3)
    try:
        outcomes = [await client.search(f"q{i}", 5) for i in range(3)]
    finally:
        await client.close()
    assert all(o.status is WebStatus.OK for o in outcomes)
    assert len(server.peers) == 3 and len(set(server.peers)) == 1
    assert server.requests[0]["output"] == "json" and server.requests[0]["engine"] == "google"
