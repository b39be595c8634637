"""Reuse Bot Connector clients across turns.

botbuilder 4.17 builds a new ConnectorClient (msrest pipeline, retry policy, HTTP session) for every
incoming activity; under load that is a tenth of the bot's CPU. The client for a serviceUrl and
audience is the same every time, so keep it. (Botbuilder for .NET caches them the same way.)
"""

from __future__ import annotations

from collections import OrderedDict

from botbuilder.integration.aiohttp import ConfigurationBotFrameworkAuthentication
from botbuilder.schema import Activity
from botframework.connector import ConnectorClient
from botframework.connector.auth import AuthenticateRequestResult, ConnectorFactory

from bot import auth


class CachingConnectorFactory(ConnectorFactory):
    def __init__(self, inner: ConnectorFactory, cache: OrderedDict[tuple[str, str], ConnectorClient]) -> None:
        self._inner = inner
        self._cache = cache

    async def create(self, service_url: str, audience: str | None = None) -> ConnectorClient:
        key = (service_url, audience or "")
        client = self._cache.get(key)
        if client is None:
            client = await self._inner.create(service_url, audience)
            self._cache[key] = client
            while len(self._cache) > CachingAuthentication.MAX_CLIENTS:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return client


class CachingAuthentication(ConfigurationBotFrameworkAuthentication):
    """The SDK's configuration-based authentication, handing out cached connector clients; token
    validation with signing keys fetched off the event loop and a deadline (see bot/auth.py)."""

    MAX_CLIENTS = 256  # one per channel endpoint in practice; bounded for safety

    def __init__(self, configuration: object, auth_timeout: float = 10.0) -> None:
        super().__init__(configuration)
        self._clients: OrderedDict[tuple[str, str], ConnectorClient] = OrderedDict()
        self._auth_timeout = auth_timeout
        auth.install(auth_timeout)

    async def authenticate_request(self, activity: Activity, auth_header: str) -> AuthenticateRequestResult:
        # Raises PermissionError (401) for a bad token, auth.SigningKeysUnavailable (503) without keys.
        result = await auth.validate(super().authenticate_request(activity, auth_header), self._auth_timeout)
        if result.connector_factory is not None:
            result.connector_factory = CachingConnectorFactory(result.connector_factory, self._clients)
        return result
