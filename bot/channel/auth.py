"""Inbound Bot Framework tokens: botframework-connector 4.17 fetches the signing keys with a blocking
`requests.get` without a timeout, on the event loop, and fails on a token naming a key it does not
know with an IndexError (a 500): shown on its own key cache by
tests/bot/test_auth_keys.py::test_botframework_417_key_cache_blocks_the_loop_and_fails_on_unknown_kids;
on the app by test_slow_key_endpoint_does_not_freeze_the_server and
test_forged_and_odd_tokens_are_401_with_one_log_line (same file).

A slow metadata endpoint froze every request, /api/health included. Forged tokens (alg none, HS256,
a missing or unknown kid, no issuer, a key endorsed for another channel) make it raise IndexError,
KeyError or a bare Exception: a 500.

Here the SDK's per-URL metadata objects are replaced by ones that fetch with aiohttp, with a timeout,
one fetch at a time; `validate()` runs the SDK's validation under a deadline. Keys that cannot be had
→ SigningKeysUnavailable (the caller answers 503); anything else wrong with a token → PermissionError
(401), logged as one line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TypeVar

from botframework.connector.auth.jwt_token_extractor import JwtTokenExtractor

from hosting.logsafe import esc
from hosting.openid_keys import AsyncOpenIdMetadata, AuthUnavailable, SigningKeysUnavailable, metadata_for

log = logging.getLogger(__name__)

T = TypeVar("T")


class OutboundTokenUnavailable(AuthUnavailable):
    """The bot's own token for replying (Entra ID) could not be had in time (HTTP 503)."""


def install(fetch_timeout: float) -> None:
    """Make every JwtTokenExtractor of the SDK use the asynchronous key cache (idempotent)."""
    AsyncOpenIdMetadata.fetch_timeout = fetch_timeout
    JwtTokenExtractor.get_open_id_metadata = staticmethod(metadata_for)


async def validate(call: Awaitable[T], deadline: float) -> T:
    """Await the SDK's authentication of a request within `deadline` seconds.

    Keys not to be had in time: SigningKeysUnavailable. Any other failure: PermissionError, which the
    adapter answers with 401. Either way one log line, no traceback.
    """
    try:
        return await asyncio.wait_for(call, deadline)
    except TimeoutError:
        log.warning("no signing keys within %.1f s: answering 503", deadline)
        raise SigningKeysUnavailable("timed out") from None
    except SigningKeysUnavailable as exc:
        log.warning("no signing keys (%s): answering 503", exc)
        raise
    except PermissionError as exc:
        log.info("rejected a bearer token: %s", esc(exc, 120))
        raise
    except Exception as exc:
        log.info("rejected a bearer token: %s: %s", type(exc).__name__, esc(exc, 120))
        raise PermissionError("invalid bearer token") from None


__all__ = ["AuthUnavailable", "OutboundTokenUnavailable", "SigningKeysUnavailable", "install", "validate"]
