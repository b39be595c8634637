"""The production path: exchange the Direct Line secret for a token bound to one user.

`POST {DIRECT_LINE_ENDPOINT}/tokens/generate` with `Authorization: Bearer <secret>` and
`{"user": {"id": "dl_…"}}`. The secret stays in this object: it is not logged, not put in errors,
and only the token (valid for one conversation, about an hour) ever reaches a browser.
"""

from __future__ import annotations

import logging
from typing import Any

import aiohttp

from crag.outbound.http_proxy import proxy_options

log = logging.getLogger(__name__)


class TokenExchangeError(Exception):
    """Direct Line did not give a token (network, status or body); the message holds no secret."""


class DirectLineTokenClient:
    def __init__(self, endpoint: str, secret: str, timeout_seconds: float = 10.0) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.__secret = secret
        self._timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self._session: aiohttp.ClientSession | None = None
        self._proxy = proxy_options(self.endpoint)  # HTTP(S)_PROXY, NO_PROXY

    def __repr__(self) -> str:  # never show the secret, even in a debugger or a traceback's locals
        return f"DirectLineTokenClient(endpoint={self.endpoint!r})"

    async def generate(self, user_id: str) -> dict[str, Any]:
        """{"token", "conversationId", "expires_in"} for a conversation of `user_id`."""
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        url = f"{self.endpoint}/tokens/generate"
        try:
            async with self._session.post(
                url,
                json={"user": {"id": user_id}},
                headers={"Authorization": f"Bearer {self.__secret}"},
                **self._proxy,
            ) as response:
                if response.status != 200:
                    raise TokenExchangeError(f"Direct Line answered {response.status} to tokens/generate")
                data = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise TokenExchangeError(f"Direct Line unreachable: {exc.__class__.__name__}") from None
        if not (
            isinstance(data, dict)
            and isinstance(data.get("token"), str)
            and isinstance(data.get("conversationId"), str)
        ):
            raise TokenExchangeError("Direct Line answered without a token")
        expires_in = data.get("expires_in")
        return {
            "token": data["token"],
            "conversationId": data["conversationId"],
            "expires_in": expires_in if isinstance(expires_in, int) else 3600,
        }

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
