"""Microsoft Entra ID tokens for the Azure services the bot talks to without keys.

In Azure the bot runs as its managed identity (AZURE_CLIENT_ID names the user-assigned one, read by
azure-identity itself); on a developer's machine DefaultAzureCredential falls through to `az login`.
Each service has its own token audience, below. Search and Blob take the credential directly (the
SDKs put `Authorization: Bearer` on each request); Redis and PostgreSQL take the token as the
password of a login, fetched anew for every new connection so that a pool outlives one token.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential
    from azure.core.credentials_async import AsyncTokenCredential

log = logging.getLogger(__name__)

SEARCH_SCOPE = "https://search.azure.com/.default"
STORAGE_SCOPE = "https://storage.azure.com/.default"
REDIS_SCOPE = "https://redis.azure.com/.default"
POSTGRES_SCOPE = "https://ossrdbms-aad.database.windows.net/.default"


def async_credential() -> AsyncTokenCredential:
    """A new async credential; its owner closes it (it holds an HTTP session of its own)."""
    from azure.identity.aio import DefaultAzureCredential

    return DefaultAzureCredential()


def sync_credential() -> TokenCredential:
    """A new credential for the synchronous SDK clients (the vector cache's Blob mirror)."""
    from azure.identity import DefaultAzureCredential

    return DefaultAzureCredential()


class TokenPassword:
    """An async callable giving a fresh token for one audience: the password of a Redis or
    PostgreSQL login. azure-identity caches the token and renews it before it expires."""

    def __init__(self, scope: str, credential: AsyncTokenCredential | None = None) -> None:
        self.scope = scope
        self._credential = credential

    async def __call__(self) -> str:
        if self._credential is None:  # made on first use: inside the event loop that uses it
            self._credential = async_credential()
        token = await self._credential.get_token(self.scope)
        return token.token

    async def close(self) -> None:
        if self._credential is not None:
            await self._credential.close()
            self._credential = None
