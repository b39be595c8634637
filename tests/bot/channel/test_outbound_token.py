"""The bot's own token for replying is fetched off the event loop, under a deadline.

MSAL fetches it with a blocking HTTP client; botbuilder calls it from inside the reply pipeline,
on the event loop. A credentials object whose fetch stalls stands in for a stalled Entra ID here.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from types import SimpleNamespace
from typing import Any

import pytest
from botbuilder.integration.aiohttp import ConfigurationBotFrameworkAuthentication
from botbuilder.schema import Activity, ConversationAccount
from botframework.connector.aio import ConnectorClient
from botframework.connector.auth import MicrosoftAppCredentials

from bot.channel.auth import OutboundTokenUnavailable
from bot.channel.connector_cache import CachingAuthentication, CachingConnectorFactory, warm_token
from tests.bot.loop_ticks import LoopTicks
from tests.fakes.bot_connector import FakeConnector

APP_ID = "11111111-2222-3333-4444-555555555555"


class StallingCredentials:
    def __init__(self, stall: float, app_id: str = APP_ID) -> None:
        self.microsoft_app_id = app_id
        self.stall = stall
        self.calls = 0
        self.release = threading.Event()

    def get_access_token(self, force_refresh: bool = False) -> str:
        self.calls += 1
        self.release.wait(self.stall)  # blocking, like MSAL's requests call
        return "token"


def _client(credentials: Any) -> Any:
    return SimpleNamespace(config=SimpleNamespace(credentials=credentials))


class Inner:
    def __init__(self, client: Any) -> None:
        self.client = client

    async def create(self, service_url: str, audience: str | None = None) -> Any:
        return self.client


async def test_a_stalled_token_fetch_does_not_freeze_the_loop_and_ends_in_503() -> None:
    credentials = StallingCredentials(stall=30)
    factory = CachingConnectorFactory(Inner(_client(credentials)), OrderedDict(), token_timeout=0.5)
    started = time.monotonic()
    try:
        async with LoopTicks() as loop:
            with pytest.raises(OutboundTokenUnavailable):
                await factory.create("https://smba.example/teams/", "aud")
    finally:
        credentials.release.set()
    elapsed = time.monotonic() - started
    assert 0.4 < elapsed < 2.0
    assert loop.ticks >= 20  # the loop kept running while the fetch stalled (about 50 ticks in 0.5 s)


async def test_a_refused_token_is_503_not_401() -> None:
    class Refused(StallingCredentials):
        def get_access_token(self, force_refresh: bool = False) -> str:
            raise PermissionError("Failed to get access token with error: invalid_client")

    with pytest.raises(OutboundTokenUnavailable):
        await warm_token(_client(Refused(0)), 1.0)


async def test_a_quick_token_is_fetched_each_turn_and_no_app_id_needs_none() -> None:
    quick = StallingCredentials(stall=0)
    factory = CachingConnectorFactory(Inner(_client(quick)), OrderedDict(), token_timeout=1.0)
    await factory.create("https://smba.example/teams/", "aud")
    await factory.create("https://smba.example/teams/", "aud")  # cached client, token checked again
    assert quick.calls == 2
    anonymous = StallingCredentials(stall=30, app_id="")
    await warm_token(_client(anonymous), 0.1)  # returns at once: nothing to fetch
    assert anonymous.calls == 0


async def test_one_user_token_client_per_app_id_not_one_per_activity() -> None:
    from types import SimpleNamespace as NS

    from botframework.connector.auth import AuthenticationConstants, ClaimsIdentity

    from bot.channel.connector_cache import CachingAuthentication

    config = NS(APP_ID="11111111-2222-3333-4444-555555555555", APP_PASSWORD="secret", APP_TYPE="MultiTenant")
    authentication = CachingAuthentication(config)

    def claims(app_id: str) -> ClaimsIdentity:
        return ClaimsIdentity({AuthenticationConstants.AUDIENCE_CLAIM: app_id}, True)

    first = await authentication.create_user_token_client(claims(config.APP_ID))
    again = await authentication.create_user_token_client(claims(config.APP_ID))
    assert first is again
    # Another app's claims are still refused by the SDK, cache or not.
    with pytest.raises(Exception, match="Invalid app_id"):
        await authentication.create_user_token_client(claims("99999999-2222-3333-4444-555555555555"))


async def test_botbuilder_417_builds_a_connector_client_for_every_activity() -> None:
    """The cost bot/channel/connector_cache.py saves, on the SDK's own authentication: each
    activity's connector factory builds a new client (pipeline, retry policy, HTTP session)."""
    # No app id: nothing is fetched from the network.
    config = SimpleNamespace(APP_ID="", APP_PASSWORD="", APP_TYPE="MultiTenant")
    activity = Activity(type="message", service_url="http://127.0.0.1:9/", channel_id="emulator")

    async def clients_for_two_activities(authentication: Any) -> list[Any]:
        clients = []
        for _ in range(2):
            result = await authentication.authenticate_request(activity, "")
            clients.append(await result.connector_factory.create(activity.service_url, result.audience))
        return clients

    stock = await clients_for_two_activities(ConfigurationBotFrameworkAuthentication(config))
    ours = await clients_for_two_activities(CachingAuthentication(config))
    assert stock[0] is not stock[1] and ours[0] is ours[1]


async def test_botbuilder_417_fetches_the_outbound_token_on_the_event_loop(connector: FakeConnector) -> None:
    """The defect bot/channel/connector_cache.py works around, on the SDK's own reply path: msrest's
    pipeline asks the credentials (MSAL, a blocking HTTP client) for the token on the event loop, so
    a slow Entra ID stops every request for as long as it takes."""

    class SlowEntraId(MicrosoftAppCredentials):  # type: ignore[misc]  # botframework: no type information
        def get_access_token(self, force_refresh: bool = False) -> str:
            time.sleep(2.0)
            return "token"

    client = ConnectorClient(SlowEntraId(APP_ID, "secret"), base_url=connector.url)
    reply = Activity(type="message", text="hi", conversation=ConversationAccount(id="c"))
    async with LoopTicks() as loop:
        await client.conversations.reply_to_activity("c", "a-1", reply)
    assert loop.ticks < 50  # a free loop ticks about 200 times in those 2 s
    assert len(connector.activities) == 1
