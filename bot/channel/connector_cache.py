"""Bot Connector clients reused across turns, their outbound token fetched off the event loop:
botbuilder 4.17 asks for the bot's own token on the event loop and builds a new client for every
activity, as tests/bot/channel/test_outbound_token.py shows on its own path
(test_botbuilder_417_fetches_the_outbound_token_on_the_event_loop,
test_botbuilder_417_builds_a_connector_client_for_every_activity) and on ours
(test_a_stalled_token_fetch_does_not_freeze_the_loop_and_ends_in_503).

Sending a reply needs the bot's own token from Entra ID, which the SDK gets with MSAL's blocking HTTP
client inside msrest's pipeline, on the event loop: a stalled login endpoint would freeze every
request, as slow inbound signing keys did (bot/channel/auth.py). So the token is fetched first, in a
worker thread with a deadline; the pipeline then finds it in MSAL's cache and makes no network call.

The client (msrest pipeline, retry policy, HTTP session) for a serviceUrl and audience is the same
every time, yet the SDK builds one per incoming activity: under load that was a tenth of the bot's
CPU. So it is kept. (Botbuilder for .NET caches them the same way.)
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import aiohttp
from botbuilder.integration.aiohttp import ConfigurationBotFrameworkAuthentication
from botbuilder.schema import Activity
from botframework.connector import ConnectorClient
from botframework.connector.auth import (
    AuthenticateRequestResult,
    ClaimsIdentity,
    ConnectorFactory,
    UserTokenClient,
)
from botframework.connector.auth._built_in_bot_framework_authentication import (
    _BuiltinBotFrameworkAuthentication as _Builtin,
)

from bot.channel import auth
from bot.channel.connector_http import DirectConversations

log = logging.getLogger(__name__)

# Token fetches wait here, not in asyncio's default pool: a stalled endpoint holds at most these threads.
_TOKEN_THREADS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="outbound-token")


class CachingConnectorFactory(ConnectorFactory):  # type: ignore[misc]  # botframework: no type information
    def __init__(
        self,
        inner: ConnectorFactory,
        cache: OrderedDict[tuple[str, str], ConnectorClient],
        token_timeout: float = 10.0,
        session: Callable[[], aiohttp.ClientSession] | None = None,
    ) -> None:
        self._inner = inner
        self._cache = cache
        self._token_timeout = token_timeout
        self._session = session  # replies posted over it (bot/channel/connector_http.py); None: the SDK's way

    async def create(self, service_url: str, audience: str | None = None) -> ConnectorClient:
        key = (service_url, audience or "")
        client = self._cache.get(key)
        if client is None:
            client = await self._inner.create(service_url, audience)
            if self._session is not None:
                client.conversations = DirectConversations(client, self._session)
            self._cache[key] = client
            while len(self._cache) > CachingAuthentication.MAX_CLIENTS:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        await warm_token(client, self._token_timeout)
        return client


async def warm_token(client: ConnectorClient, timeout: float) -> None:
    """Have the client's outbound token in MSAL's cache (fetched in a worker thread), or raise
    auth.OutboundTokenUnavailable (503) after `timeout` seconds or when Entra ID refuses."""
    credentials = getattr(client.config, "credentials", None)
    if credentials is None or not getattr(credentials, "microsoft_app_id", ""):
        return  # no app id: replies go unauthenticated (Emulator, local)
    loop = asyncio.get_running_loop()
    try:
        await asyncio.wait_for(loop.run_in_executor(_TOKEN_THREADS, credentials.get_access_token), timeout)
    except TimeoutError:
        log.warning("no outbound token from Entra ID within %.1f s: answering 503", timeout)
        raise auth.OutboundTokenUnavailable("timed out") from None
    except Exception as exc:  # MSAL and requests raise many kinds; none may become a 500
        log.warning("could not get an outbound token from Entra ID: %s", type(exc).__name__)
        raise auth.OutboundTokenUnavailable(type(exc).__name__) from None


class CachingAuthentication(ConfigurationBotFrameworkAuthentication):  # type: ignore[misc]  # as above
    """The SDK's configuration-based authentication, handing out cached connector clients; token
    validation with signing keys fetched off the event loop and a deadline (see bot/channel/auth.py)."""

    MAX_CLIENTS = 256  # one per channel endpoint in practice; bounded for safety

    def __init__(self, configuration: object, auth_timeout: float = 10.0) -> None:
        super().__init__(configuration)
        self._clients: OrderedDict[tuple[str, str], ConnectorClient] = OrderedDict()
        self._token_clients: dict[str, UserTokenClient] = {}
        self._auth_timeout = auth_timeout
        self._session: aiohttp.ClientSession | None = None
        auth.install(auth_timeout)

    def session(self) -> aiohttp.ClientSession:
        """The HTTP session replies are posted over, opened on first use (inside the event loop)."""
        if self._session is None or self._session.closed:
            # The Bot Connector sets no cookies a reply needs; proxies: bot/channel/connector_http.py.
            self._session = aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar())
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def authenticate_request(self, activity: Activity, auth_header: str) -> AuthenticateRequestResult:
        # Raises PermissionError (401) for a bad token, auth.SigningKeysUnavailable (503) without keys.
        result = await auth.validate(super().authenticate_request(activity, auth_header), self._auth_timeout)
        if result.connector_factory is not None:
            result.connector_factory = CachingConnectorFactory(
                result.connector_factory, self._clients, self._auth_timeout, self.session
            )
        return result

    async def create_user_token_client(self, claims_identity: ClaimsIdentity) -> UserTokenClient:
        # The SDK builds a user-token client (msrest Configuration, credentials, pipeline) for every
        # incoming activity, though only sign-in prompts use it and this bot has none: 18 % of the
        # main thread under load. It depends on the app id alone, so one per app id serves them all.
        app_id = _Builtin.get_app_id(claims_identity) or ""
        client = self._token_clients.get(app_id)
        if client is None:
            if len(self._token_clients) >= self.MAX_CLIENTS:
                self._token_clients.clear()
            client = await super().create_user_token_client(claims_identity)
            self._token_clients[app_id] = client
        return client
