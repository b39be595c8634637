"""Signed, expiring links to the documents the bot serves under /docs/.

With an app id the bot is on the internet, and /docs/ must not hand out documents to anyone who
guesses a file name: a card's link carries `exp` (Unix time) and `sig` (HMAC-SHA256 over the path
and the expiry with a server secret), like an Azure SAS URL, and /docs/ refuses a request whose
signature is missing, wrong or expired. The Emulator / local mode (no app id, loopback only) keeps
plain links.

The standard library's hmac is enough here (itsdangerous would sign a timestamp and check its age
against the lifetime at verification, so a changed lifetime would re-date old links).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Callable
from urllib.parse import quote, unquote

from crag.core.models import CragResult

log = logging.getLogger(__name__)

_CONTEXT = b"crag-doc-links/v1"


class DocLinks:
    """Signs the links under `docs_url` (e.g. https://bot.example/docs) and checks them."""

    def __init__(
        self,
        docs_url: str,
        secret: bytes | None,
        ttl_seconds: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.docs_url = docs_url.rstrip("/")
        # None: links are plain (local mode); /docs/ then needs no signature.
        self._key = hmac.new(secret, _CONTEXT, hashlib.sha256).digest() if secret is not None else None
        self.ttl_seconds = ttl_seconds
        self._clock = clock

    @classmethod
    def from_settings(
        cls, docs_url: str, app_id: str, link_secret: str, app_password: str, ttl_hours: float
    ) -> DocLinks:
        if not app_id:
            return cls(docs_url, None, 0)
        if link_secret:
            secret = link_secret.encode()
        elif app_password:
            # Every instance of one bot has the same client secret, so its links work on all of them.
            secret = app_password.encode()
        else:
            log.warning("CRAG_LINK_SECRET is not set: document links stop working when the bot restarts")
            secret = secrets.token_bytes(32)
        return cls(docs_url, secret, int(ttl_hours * 3600))

    @property
    def signed(self) -> bool:
        return self._key is not None

    def sign_url(self, url: str, user: str = "") -> str:
        """`url` with exp and sig added when it points into /docs/; any other URL as it is. With
        access trimming, `user` is the asker the link is for (`u`, covered by the signature): /docs/
        serves the file only while that user may still read it."""
        prefix = self.docs_url + "/"
        if not url.startswith(prefix) or "?" in url or "#" in url:
            return url
        for_user = f"u={quote(user, safe='')}" if user else ""
        if self._key is None:
            return f"{url}?{for_user}" if for_user else url
        path = unquote(url[len(prefix) :])
        expires = int(self._clock()) + self.ttl_seconds
        signed = f"{url}?exp={expires}&sig={self._signature(path, expires, user)}"
        return f"{signed}&{for_user}" if for_user else signed

    def sign_result(self, result: CragResult, user: str = "") -> CragResult:
        """The result with its document citations' links signed (the engine and its cache keep
        unsigned links: a signature belongs to one card, not to the answer)."""
        if self._key is None and not user:
            return result
        citations = [c.model_copy(update={"url": self.sign_url(c.url, user)}) for c in result.citations]
        return result.model_copy(update={"citations": citations})

    def allows(self, path: str, expires: str | None, signature: str | None, user: str = "") -> bool:
        """Whether a request for `path` (relative, decoded) with these query values may be served."""
        if self._key is None:
            return True
        if not expires or not signature or not expires.isdigit() or len(expires) > 12:
            return False
        if int(expires) < self._clock():
            return False
        return hmac.compare_digest(self._signature(path, int(expires), user), signature)

    def _signature(self, path: str, expires: int, user: str = "") -> str:
        assert self._key is not None
        # Without a user the message is what it was before access trimming: older links stay valid.
        text = f"{path}\n{expires}" + (f"\n{user}" if user else "")
        message = text.encode("utf-8", "surrogatepass")
        digest = hmac.new(self._key, message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
