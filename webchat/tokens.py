"""Tokens of the local Direct Line: signed, bound to one conversation and one user, short-lived.

They are stateless (HMAC-SHA256 over the claims with a key made at start), so issuing one costs no
memory and a restart invalidates them all, as it does the in-memory conversations they point at.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

_PREFIX = "ldl1"


class TokenError(Exception):
    """The token is missing, malformed or not signed by us (HTTP 401)."""


class TokenExpired(TokenError):
    """A genuine token past its lifetime (HTTP 403, like Direct Line's TokenExpired)."""


@dataclass(frozen=True)
class TokenClaims:
    conversation_id: str
    user_id: str
    expires_at: float


class TokenIssuer:
    def __init__(
        self, ttl_seconds: int, clock: Callable[[], float] = time.time, key: bytes | None = None
    ) -> None:
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._key = key or secrets.token_bytes(32)

    def issue(self, conversation_id: str, user_id: str) -> tuple[str, int]:
        """A token for `user_id` in `conversation_id`, and its lifetime in seconds (`expires_in`)."""
        # JWT-like claim names: Web Chat reads `user` from a token's middle part and then trusts that
        # id as the user's, as it does with Azure's Direct Line tokens.
        claims = {"conv": conversation_id, "user": user_id, "exp": int(self._clock()) + self.ttl_seconds}
        payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
        return f"{_PREFIX}.{payload}.{self._sign(payload)}", self.ttl_seconds

    def verify(self, token: str) -> TokenClaims:
        parts = token.split(".")
        # Non-ASCII text cannot be ours (and hmac.compare_digest refuses to compare it: a TypeError).
        if len(parts) != 3 or parts[0] != _PREFIX or not token.isascii():
            raise TokenError("malformed token")
        payload, signature = parts[1], parts[2]
        if not hmac.compare_digest(self._sign(payload), signature):
            raise TokenError("invalid token")
        try:
            claims = json.loads(_unb64(payload))
            result = TokenClaims(str(claims["conv"]), str(claims["user"]), float(claims["exp"]))
        except (ValueError, KeyError, TypeError) as exc:  # signed by us, so only a bug gets here
            raise TokenError("malformed token") from exc
        if result.expires_at <= self._clock():
            raise TokenExpired("token expired")
        return result

    def _sign(self, payload: str) -> str:
        return _b64(hmac.new(self._key, payload.encode(), hashlib.sha256).digest())


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
