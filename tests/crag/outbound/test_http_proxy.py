"""The app's own aiohttp clients (chat calls, the bot's replies, SerpAPI, the Direct Line token
exchange) go through HTTP(S)_PROXY and skip it for NO_PROXY hosts, as the SDKs' httpx and requests do."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from botbuilder.schema import Activity
from pydantic import SecretStr

from bot.channel.connector_http import DirectConversations
from crag.eval.loopback import LoopbackServer
from crag.outbound.http_proxy import proxy_options
from crag.providers.llm.chat_http import ChatEndpoint
from crag.providers.web.serpapi import SerpApiSearch
from tests.bot.channel.test_connector_http import _client
from webchat.token_exchange import DirectLineTokenClient


class FakeProxy(LoopbackServer):
    """A forward proxy that answers requests itself: it records the absolute URLs asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{tail:.*}", self._any)

    async def _any(self, request: web.Request) -> web.Response:
        self.asked.append(str(request.url))
        if request.path.endswith("/chat/completions"):
            return web.json_response({"choices": [{"message": {"content": "via proxy"}}]})
        if request.path.endswith("/tokens/generate"):
            return web.json_response({"token": "t", "conversationId": "via-proxy", "expires_in": 60})
        if request.path == "/search":
            return web.json_response(
                {"organic_results": [{"title": "T", "link": "https://example.com/", "snippet": "s"}]}
            )
        return web.json_response({"id": "via-proxy"})


@pytest.fixture
async def proxy() -> AsyncIterator[FakeProxy]:
    fake = FakeProxy()
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture(autouse=True)
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)


async def _no_headers() -> dict[str, Any]:
    return {}


async def test_every_outbound_client_goes_through_the_proxy(
    proxy: FakeProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    # Hosts that do not resolve: only a proxy can answer for them.
    chat = ChatEndpoint("http://llm.invalid/v1/chat/completions", _no_headers, max_retries=0, timeout=10)
    try:
        reply = await chat.post({"model": "m", "messages": []})
    finally:
        await chat.close()
    assert reply["choices"][0]["message"]["content"] == "via proxy"
    async with aiohttp.ClientSession() as session:
        direct = DirectConversations(_client("http://connector.invalid", app_id=""), lambda: session)
        response = await direct.reply_to_activity("c", "a", Activity(type="message", text="hi"))
    assert response is not None and response.id == "via-proxy"
    serp = SerpApiSearch(SecretStr("k"), "http://serpapi.invalid")
    try:
        found = await serp.search("proxy test", 3)
    finally:
        await serp.close()
    assert [r.url for r in found.results] == ["https://example.com/"]
    tokens = DirectLineTokenClient("http://directline.invalid/v3/directline", "secret")
    try:
        token = await tokens.generate("dl_user")
    finally:
        await tokens.close()
    assert token["conversationId"] == "via-proxy"
    assert [u.split("?")[0] for u in proxy.asked] == [
        "http://llm.invalid/v1/chat/completions",
        "http://connector.invalid/v3/conversations/c/activities/a",
        "http://serpapi.invalid/search",
        "http://directline.invalid/v3/directline/tokens/generate",
    ]


async def test_no_proxy_hosts_are_reached_directly(proxy: FakeProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fakes.bot_connector import FakeConnector

    connector = FakeConnector()
    await connector.start()
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    try:
        async with aiohttp.ClientSession() as session:
            direct = DirectConversations(_client(connector.url, app_id=""), lambda: session)
            await direct.reply_to_activity("c", "a", Activity(type="message", text="hi"))
    finally:
        await connector.stop()
    assert proxy.asked == [] and len(connector.activities) == 1


def test_without_proxy_settings_no_proxy_is_used() -> None:
    assert proxy_options("https://smba.trafficmanager.net/amer/") == {}
