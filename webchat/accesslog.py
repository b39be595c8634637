"""Keeps the local Direct Line's routine traffic out of aiohttp's access log.

An open chat page polls once a second, which would drown everything else, and the bot's replies to
the connector routes carry the connector key in their path, which belongs in no log. Failed polls
are still logged.
"""

from __future__ import annotations

import logging

from webchat.connector_api import PREFIX as CONNECTOR_PREFIX
from webchat.directline_api import PREFIX as DIRECTLINE_PREFIX

_POLL = f'"GET {DIRECTLINE_PREFIX}/conversations/'


class QuietWebChatAccess(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if f" {CONNECTOR_PREFIX}/" in message:
            return False
        return not (_POLL in message and "/activities" in message and '" 200 ' in message)


def quiet_access_log(logger: logging.Logger | None = None) -> None:
    """Install the filter on aiohttp's access logger, once."""
    target = logger or logging.getLogger("aiohttp.access")
    if not any(isinstance(f, QuietWebChatAccess) for f in target.filters):
        target.addFilter(QuietWebChatAccess())
