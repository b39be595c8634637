"""Signing keys of an OpenID issuer, fetched without blocking and cached: the bot's inbound Bot
Framework tokens (bot/channel/auth.py) and the admin dashboard's Entra ID tokens
(admin/entra_group.py) both check
signatures with them.

botframework-connector 4.17 fetches the OpenID metadata and signing keys with a blocking
`requests.get` without a timeout from inside the event loop; these metadata objects fetch with
aiohttp, with a timeout, one fetch at a time. Keys that cannot be had -> SigningKeysUnavailable.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from datetime import datetime, timedelta
from typing import Any

import aiohttp
import jwt
from botframework.connector.auth import jwt_token_extractor
from jwt.algorithms import RSAAlgorithm

from hosting.logsafe import esc

log = logging.getLogger(__name__)

# After a failed fetch, wait this long before the next one (requests meanwhile use the keys they have,
# or get a 503 at once instead of each waiting for the same unreachable endpoint).
RETRY_AFTER = timedelta(seconds=30)


class AuthUnavailable(Exception):
    """Authentication could not be completed in time through no fault of the caller (HTTP 503)."""


class SigningKeysUnavailable(AuthUnavailable):
    """The signing keys could not be fetched in time (HTTP 503: the token may well be valid)."""


class AsyncOpenIdMetadata(jwt_token_extractor._OpenIdMetadata):  # type: ignore[misc]
    """The SDK's key cache (refreshed daily, or hourly on an unknown kid), fetching asynchronously."""

    fetch_timeout = 10.0

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.failed_at = datetime.min
        self._inflight: tuple[asyncio.AbstractEventLoop, asyncio.Task[None]] | None = None

    async def get(self, key_id: str | None) -> Any:
        now = datetime.now()
        if self.last_updated < now - timedelta(days=1):
            await self._refresh_or_keep()
        key = self._find(key_id)
        if key is None and key_id and self.keys and self.last_updated < now - timedelta(hours=1):
            await self._refresh_or_keep()  # a key published since the last fetch
            key = self._find(key_id)
        if key is None:
            raise jwt.InvalidTokenError("the token's signing key id is missing or unknown")
        return key

    async def _refresh_or_keep(self) -> None:
        """Fetch the keys; on failure keep the ones held, and raise only if there are none."""
        if self.failed_at < datetime.now() - RETRY_AFTER:
            with contextlib.suppress(SigningKeysUnavailable):  # logged by _fetch
                await self._refresh()
                return
        if not self.keys:
            raise SigningKeysUnavailable("no signing keys")

    async def _refresh(self) -> None:
        # One fetch per event loop at a time; a caller's deadline does not cancel the fetch others await.
        loop = asyncio.get_running_loop()
        if self._inflight is None or self._inflight[0] is not loop or self._inflight[1].done():
            self._inflight = (loop, loop.create_task(self._fetch()))
        await asyncio.shield(self._inflight[1])

    async def _fetch(self) -> None:
        timeout = aiohttp.ClientTimeout(total=self.fetch_timeout)
        try:
            async with aiohttp.ClientSession(timeout=timeout, trust_env=True) as session:
                metadata = await _get_json(session, self.url)
                keys = (await _get_json(session, str(metadata["jwks_uri"])))["keys"]
            if not isinstance(keys, list):
                raise TypeError("the key set is not a list")
        except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError) as exc:
            # Recorded here, not by the caller: its deadline may have passed before the fetch ended.
            self.failed_at = datetime.now()
            log.warning("could not fetch the signing keys from %s: %s", esc(self.url), type(exc).__name__)
            raise SigningKeysUnavailable(type(exc).__name__) from None
        self.keys = [k for k in keys if isinstance(k, dict)]
        self.last_updated = datetime.now()

    def _find(self, key_id: str | None) -> Any:
        if not key_id:
            return None
        for key in self.keys:
            if key.get("kid") == key_id:
                try:
                    public_key = RSAAlgorithm.from_jwk(json.dumps(key))
                except (ValueError, TypeError, KeyError, jwt.PyJWTError):
                    return None
                endorsements = key.get("endorsements")
                return jwt_token_extractor._OpenIdConfig(
                    public_key, endorsements if isinstance(endorsements, list) else []
                )
        return None


async def _get_json(session: aiohttp.ClientSession, url: str) -> Any:
    async with session.get(url) as response:
        response.raise_for_status()
        return await response.json(content_type=None)


_METADATA: dict[str, AsyncOpenIdMetadata] = {}


def metadata_for(url: str) -> AsyncOpenIdMetadata:
    metadata = _METADATA.get(url)
    if metadata is None:
        metadata = _METADATA.setdefault(url, AsyncOpenIdMetadata(url))
    return metadata


async def signing_key(metadata_url: str, key_id: str | None) -> Any:
    """The public key published under `key_id` at an OpenID metadata URL, from the same cache and
    non-blocking fetch as the bot's own tokens (the admin dashboard's Entra ID tokens use it).
    Unknown or missing kid: jwt.InvalidTokenError; keys not to be had: SigningKeysUnavailable."""
    return (await metadata_for(metadata_url).get(key_id)).public_key
