"""The one way the bot opens Redis: from CRAG_CACHE_URL, with the URL's password, or with an Entra
token as the password (Azure Managed Redis with access keys off).

With Entra the URL names the user (the identity's object id: `rediss://OBJECT_ID@HOST:10000`) and no
password; each new connection logs in with a fresh token. A token expires after about an hour and
the service then closes connections logged in with it: the clients here retry never, so the next
call sees an error (a miss or the memory fallback, as for any Redis failure) and the pool's next
connection logs in anew.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import unquote, urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis.credentials import CredentialProvider

from crag.outbound.entra_tokens import REDIS_SCOPE, TokenPassword

RedisAuth = Literal["url", "entra"]


class EntraRedisCredentials(CredentialProvider):
    """redis-py asks this for a user and password on each new connection."""

    def __init__(self, username: str, password: TokenPassword) -> None:
        self.username = username
        self.password = password

    def get_credentials(self) -> tuple[str, str]:
        # The async client never calls this; a token needs the event loop.
        raise NotImplementedError("Entra credentials are async only")

    async def get_credentials_async(self) -> tuple[str, str]:
        return self.username, await self.password()


def check_url(url: str) -> str:
    url = url.strip()
    if not url.startswith(("redis://", "rediss://", "unix://")):
        # Without the value: it may hold a password.
        raise ValueError("CRAG_CACHE_URL must be a redis://, rediss:// or unix:// URL")
    return url


def redis_client(url: str, auth: RedisAuth = "url", **options: Any) -> aioredis.Redis:
    """A client that connects on first use (building it contacts nothing). options: redis-py's."""
    url = check_url(url)
    if auth == "url":
        return aioredis.Redis.from_url(url, **options)
    parts = urlsplit(url)
    if parts.password:
        raise ValueError("CRAG_REDIS_AUTH=entra: CRAG_CACHE_URL must not hold a password (the token is one)")
    if not parts.username:
        raise ValueError(
            "CRAG_REDIS_AUTH=entra: CRAG_CACHE_URL must name the identity's object id as its user"
            " (rediss://OBJECT_ID@HOST:PORT)"
        )
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port:
        netloc += f":{parts.port}"
    # redis-py refuses a user in the URL beside a credential provider: the provider names it.
    bare = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    credentials = EntraRedisCredentials(unquote(parts.username), TokenPassword(REDIS_SCOPE))
    return aioredis.Redis.from_url(bare, credential_provider=credentials, **options)


async def close_client(client: aioredis.Redis) -> None:
    """Close the client and, with Entra, the credential its logins take tokens from."""
    await client.aclose()
    provider = client.connection_pool.connection_kwargs.get("credential_provider")
    if isinstance(provider, EntraRedisCredentials):
        await provider.password.close()
