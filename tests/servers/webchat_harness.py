"""Helpers for the Web Chat tests: an echo bot behind a real CloudAdapter, a settable clock, and a
small Direct Line client speaking to the app over HTTP on 127.0.0.1 as Web Chat does."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from botbuilder.core import ActivityHandler, TurnContext
from botbuilder.integration.aiohttp import CloudAdapter, ConfigurationBotFrameworkAuthentication
from botbuilder.schema import Activity, ChannelAccount

from hosting import client_address
from hosting.app_settings import BotSettings
from webchat import setup_webchat
from webchat.limits import LocalLimits
from webchat.page import DEFAULT_BUNDLE
from webchat.wiring import LOCAL_DIRECTLINE

Client = TestClient[web.Request, web.Application]


class EchoBot(ActivityHandler):
    """Answers "echo: <text>" or "value: <value>", greets new members; keeps what it received."""

    def __init__(self) -> None:
        self.received: list[Activity] = []

    async def on_turn(self, turn_context: TurnContext) -> None:
        self.received.append(turn_context.activity)
        await super().on_turn(turn_context)

    async def on_message_activity(self, turn_context: TurnContext) -> None:
        activity = turn_context.activity
        if activity.value is not None:
            await turn_context.send_activity(f"value: {activity.value}")
        else:
            await turn_context.send_activity(f"echo: {activity.text}")

    async def on_members_added_activity(
        self, members_added: list[ChannelAccount], turn_context: TurnContext
    ) -> None:
        for member in members_added:
            if member.id != turn_context.activity.recipient.id:
                await turn_context.send_activity(f"welcome {turn_context.activity.locale or '-'}")


@dataclass
class Clock:
    now: float = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def settings(**values: Any) -> BotSettings:
    # Every Web Chat setting given explicitly, so a developer's environment or .env cannot change the test.
    defaults: dict[str, Any] = {
        "DIRECT_LINE_SECRET": "",
        "DIRECT_LINE_ENDPOINT": "https://directline.botframework.com/v3/directline",
        "MicrosoftAppId": "",
        "MicrosoftAppPassword": "",
        "WEBCHAT_ALLOWED_ORIGINS": "",
        "WEBCHAT_TOKENS_PER_MINUTE": 600,
        "PUBLIC_BASE_URL": "",
        "BOT_NAME": "Test Bot",
    }
    return BotSettings(**{**defaults, **values})


@dataclass
class Harness:
    client: Client
    bot: EchoBot
    monotonic: Clock
    wall: Clock


@asynccontextmanager
async def webchat_app(
    limits: LocalLimits | None = None,
    bundle: Path = DEFAULT_BUNDLE,
    shared: aioredis.Redis | None = None,
    **setting_values: Any,
) -> AsyncIterator[Harness]:
    """An app with only the Web Chat routes, served on 127.0.0.1 (the bot replies over HTTP to it).
    shared: the Redis its token limit is counted in, with other apps (replicas) given the same."""
    config = settings(**setting_values)
    adapter = CloudAdapter(ConfigurationBotFrameworkAuthentication(config.bot_framework_config()))
    bot = EchoBot()
    monotonic, wall = Clock(), Clock(1_800_000_000.0)
    # As app.py wires it: the client's address is found before any handler runs.
    app = web.Application(middlewares=[client_address.middleware(config.proxy_networks)])
    setup_webchat(
        app,
        config,
        adapter,
        bot.on_turn,
        limits=limits,
        bundle=bundle,
        monotonic=monotonic,
        wall_clock=wall,
        shared=shared,
    )
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield Harness(client, bot, monotonic, wall)
        # Let the bot finish its turns while the server still answers: its connector client posts
        # from worker threads, which would otherwise wait on a closing server.
        local = app.get(LOCAL_DIRECTLINE)
        if local is not None:
            assert await local.wait_idle(10.0)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class Session:
    """One Web Chat user: the token endpoint's answer and the conversation started with it."""

    token: str
    conversation_id: str
    user_id: str
    domain: str
    watermark: str = ""
    seen: list[dict[str, Any]] = field(default_factory=list)

    @property
    def headers(self) -> dict[str, str]:
        return bearer(self.token)

    @property
    def path(self) -> str:
        return f"/v3/directline/conversations/{self.conversation_id}"


async def get_token(client: Client) -> dict[str, Any]:
    response = await client.post("/api/directline/token")
    assert response.status == 200, await response.text()
    body: dict[str, Any] = await response.json()
    return body


async def start(client: Client, headers: dict[str, str] | None = None) -> Session:
    token = await get_token(client)
    response = await client.post(
        "/v3/directline/conversations", headers={**bearer(token["token"]), **(headers or {})}
    )
    assert response.status == 201, await response.text()
    body = await response.json()
    assert body["conversationId"] == token["conversationId"]
    return Session(body["token"], body["conversationId"], token["userId"], token["domain"])


async def poll(client: Client, session: Session) -> list[dict[str, Any]]:
    """One GET with the session's watermark, as Web Chat polls; advances the watermark."""
    response = await client.get(
        f"{session.path}/activities", params={"watermark": session.watermark}, headers=session.headers
    )
    assert response.status == 200, await response.text()
    body = await response.json()
    session.watermark = body["watermark"]
    session.seen.extend(body["activities"])
    activities: list[dict[str, Any]] = body["activities"]
    return activities


async def wait_for(
    client: Client,
    session: Session,
    predicate: Callable[[dict[str, Any]], bool],
    timeout: float = 10.0,
) -> dict[str, Any]:
    """Poll until an activity matching `predicate` has arrived (including ones seen before)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        for activity in session.seen:
            if predicate(activity):
                return activity
        if loop.time() > deadline:
            raise AssertionError(f"no matching activity in {session.seen}")
        await poll(client, session)
        await asyncio.sleep(0.02)


async def post_message(client: Client, session: Session, **activity: Any) -> tuple[int, dict[str, Any]]:
    # UTF-8 as a browser sends it (aiohttp's json= would escape every non-ASCII character).
    data = json.dumps({"type": "message", **activity}, ensure_ascii=False).encode()
    headers = {**session.headers, "Content-Type": "application/json"}
    response = await client.post(f"{session.path}/activities", data=data, headers=headers)
    body: dict[str, Any] = await response.json()
    return response.status, body
