"""Entra ID access tokens of the admin group (CRAG_ADMIN_GROUP), for deployments with an app id.

A member gets a delegated access token for the bot's app registration (audience: the app id, or its
App ID URI `api://<app id>`), issued by the configured tenant, with the group's object id in its
`groups` claim. The signature is checked against the tenant's published keys, fetched and cached by
hosting/openid_keys.py (no blocking fetch, a deadline). The Bot Framework's own tokens for the app are
refused:
their issuer is not the tenant. What a deployer sets up is in README.md (*Admin dashboard*).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import jwt

from admin.errors import Denied
from hosting.logsafe import esc
from hosting.openid_keys import SigningKeysUnavailable, signing_key

log = logging.getLogger(__name__)

KeyLookup = Callable[[str, str | None], Awaitable[Any]]


class EntraGroupTokens:
    def __init__(
        self,
        metadata_url: str,
        tenant: str,
        audiences: Iterable[str],
        group: str,
        deadline: float,
        keys: KeyLookup = signing_key,
        leeway: float = 60.0,
    ) -> None:
        self.metadata_url = metadata_url
        self.tenant = tenant.lower()
        self.audiences = sorted({a for a in audiences if a})
        self.group = group.lower()
        self.deadline = deadline
        self._keys = keys
        self._leeway = leeway
        # v2.0 tokens name the tenant in login.microsoftonline.com's issuer, v1.0 ones in sts.windows.net's;
        # which one a token is depends on the app registration's accessTokenAcceptedVersion.
        self.issuers = [
            f"https://login.microsoftonline.com/{self.tenant}/v2.0",
            f"https://sts.windows.net/{self.tenant}/",
        ]

    async def member(self, token: str) -> tuple[str, float]:
        """The member's object id and the token's expiry (epoch seconds); Denied otherwise."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Denied(401, "admin.denied.token", "malformed bearer token") from None
        if header.get("alg") != "RS256":
            raise Denied(401, "admin.denied.token", f"bearer token alg {esc(header.get('alg'), 20)}")
        try:
            key = await asyncio.wait_for(self._keys(self.metadata_url, header.get("kid")), self.deadline)
        except (TimeoutError, SigningKeysUnavailable):
            raise Denied(503, "admin.denied.keys", "the tenant's signing keys cannot be fetched") from None
        except jwt.PyJWTError as exc:
            raise Denied(401, "admin.denied.token", f"bearer token: {esc(exc, 120)}") from None
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=["RS256"],
                audience=self.audiences,
                issuer=self.issuers,
                leeway=self._leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            raise Denied(401, "admin.denied.token", f"bearer token: {esc(exc, 120)}") from None
        oid = str(claims.get("oid", ""))
        if str(claims.get("tid", "")).lower() != self.tenant:
            raise Denied(401, "admin.denied.token", "bearer token of another tenant")
        if "scp" not in claims:
            # An ID token or an app-only token: the dashboard is for a signed-in person's access token.
            raise Denied(401, "admin.denied.token", "not a delegated access token (no scp claim)")
        groups = claims.get("groups")
        if not isinstance(groups, list):
            if "hasgroups" in claims or "groups" in (claims.get("_claim_names") or {}):
                # Too many groups to list: only the groups assigned to the app keep the claim short.
                raise Denied(403, "admin.denied.overage", f"groups overage in the token of {esc(oid, 40)}")
            raise Denied(403, "admin.denied.group", f"no groups claim in the token of {esc(oid, 40)}")
        if self.group not in {str(g).lower() for g in groups}:
            raise Denied(403, "admin.denied.group", f"{esc(oid, 40)} is not in the admin group")
        return oid, float(claims["exp"])
