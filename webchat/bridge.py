"""Hands local Direct Line activities to the bot, through the same CloudAdapter as /api/messages.

The only module of the package that touches Bot Framework types. The bot sees an ordinary channel
activity whose serviceUrl points back at this app's connector routes (webchat/connector_api.py),
so it replies exactly as it does to the Emulator or to Azure, over HTTP.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from botbuilder.core import TurnContext
from botbuilder.schema import Activity

from hosting.logsafe import esc

log = logging.getLogger(__name__)

TurnLogic = Callable[[TurnContext], Awaitable[Any]]


class TurnProcessor(Protocol):
    """What the bridge needs of the adapter (CloudAdapter.process_activity)."""

    async def process_activity(self, auth: Any, activity: Any, logic: TurnLogic, /) -> Any: ...


class BotBridge:
    def __init__(self, adapter: TurnProcessor, logic: TurnLogic) -> None:
        self._adapter = adapter
        self._logic = logic

    @staticmethod
    def check(activity: dict[str, Any]) -> None:
        """Raise ValueError if the SDK cannot read `activity`, so the client gets a 400 at once
        rather than its message being stored and then failing inside the turn."""
        try:
            Activity().deserialize(activity)
        except Exception as exc:  # msrest raises DeserializationError, and TypeError on odd shapes
            raise ValueError(str(exc).split("\n", 1)[0][:200]) from None

    async def deliver(self, activity: dict[str, Any], service_url: str) -> bool:
        """Run one bot turn for `activity` (a Direct Line activity as stored); False if it failed."""
        try:
            inbound = Activity().deserialize({**activity, "serviceUrl": service_url})
            # "" = no Authorization header: the local Direct Line exists only while authentication is off.
            await self._adapter.process_activity("", inbound, self._logic)
        except Exception:
            # The turn's own errors are answered by the adapter's on_turn_error; this is the rest
            # (e.g. the connector route refused a reply). The user's message stays delivered.
            log.exception(
                "bot turn failed for %s activity %s", esc(activity.get("type")), esc(activity.get("id"))
            )
            return False
        return True
