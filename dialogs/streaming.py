"""Streaming in Teams 1:1 chats: informative updates while the engine works, the answer text as the
model writes it, then the final message (which alone carries the card, the AI label, citations and
the feedback buttons).

Teams reads `streaminfo` entities on typing activities: the first update returns the stream id that
every later one names, with an increasing sequence number; about one update per 1.5 s is allowed.
Group chats, channels, the Emulator and Web Chat get the plain typing indicator instead.

The user can press Stop while an answer streams. Teams then refuses the next update (and the final
message) with 403 ContentStreamNotAllowed: the streamer raises TurnStopped, which ends the engine's
turn, and the turn goes quietly (no error text, nothing sent). An update Teams refuses for any other
reason (streaming not enabled, the stream's time limit) ends streaming, not the turn: the answer then
comes as one plain message.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any, ClassVar

from botbuilder.core import TurnContext
from botbuilder.schema import Activity, ActivityTypes, Entity, ResourceResponse
from botframework.connector.models import ErrorResponseException

from crag.core.models import CITATION_MARKER
from crag.core.protocols import TurnStopped
from hosting.ui_texts import Lang, t

log = logging.getLogger(__name__)

# A citation marker with the space before it: the stream shows the answer without them.
_MARKER = re.compile(r"\s*" + CITATION_MARKER.pattern)


class StreamInfoEntity(Entity):  # type: ignore[misc]
    # botbuilder's Entity would drop these fields on send.
    _attribute_map: ClassVar[dict[str, dict[str, str]]] = {
        "type": {"key": "type", "type": "str"},
        "stream_id": {"key": "streamId", "type": "str"},
        "stream_type": {"key": "streamType", "type": "str"},
        "stream_sequence": {"key": "streamSequence", "type": "int"},
    }

    def __init__(
        self, *, stream_type: str, stream_id: str | None = None, stream_sequence: int | None = None, **kw: Any
    ) -> None:
        super().__init__(type="streaminfo", **kw)
        self.stream_type = stream_type
        self.stream_id = stream_id
        self.stream_sequence = stream_sequence


def refusal(exc: ErrorResponseException) -> tuple[int, str, str]:
    """The status, error code and message of a reply Teams refused."""
    status = getattr(exc.response, "status_code", 0) or 0
    detail = getattr(exc.error, "error", None)
    return int(status), str(getattr(detail, "code", "") or ""), str(getattr(detail, "message", "") or "")


def user_stopped(exc: ErrorResponseException) -> bool:
    """Teams' answer to a streaming message after the user pressed Stop: 403, ContentStreamNotAllowed.
    The same code with the stream's time limit in its message is Teams ending the stream, not the
    user: that answer still goes out, as a plain message."""
    status, code, message = refusal(exc)
    if status != 403 and code != "ContentStreamNotAllowed":
        return False
    return "streaming time" not in message.lower()


def can_stream(context: TurnContext) -> bool:
    activity = context.activity
    kind = activity.conversation.conversation_type if activity.conversation else None
    return activity.channel_id == "msteams" and kind == "personal"


class TeamsStreamer:
    def __init__(self, context: TurnContext, lang: Lang, interval_s: float = 1.5) -> None:
        self._context = context
        self._lang = lang
        self._interval = interval_s
        self._sequence = 0
        self._last = 0.0
        self._last_text = ""
        self.stream_id: str | None = None
        self.open = True  # False once Teams refused an update: the answer goes as a plain message

    async def on_stage(self, stage: str) -> None:
        await self._send("informative", t(f"stage.{stage}", self._lang), first=self.stream_id is None)

    async def on_text(self, text: str) -> None:
        # Source numbers are renumbered in the final message: leave them out of the preview.
        await self._send("streaming", _MARKER.sub("", text))

    async def send_final(self, reply: Activity) -> ResourceResponse | None:
        """Send the final message, closing the stream when one is open. Raises TurnStopped when
        the user stopped the stream after its last update."""
        if self.open and self.stream_id is not None:
            reply.entities = [
                *(reply.entities or []),
                StreamInfoEntity(stream_type="final", stream_id=self.stream_id),
            ]
        try:
            return await self._context.send_activity(reply)
        except ErrorResponseException as exc:
            self._raise_if_stopped(exc)
            raise

    async def _send(self, kind: str, text: str, first: bool = False) -> None:
        now = time.monotonic()
        if not self.open:
            return
        if not first and (now - self._last < self._interval or text == self._last_text):
            return  # Teams throttles faster updates; the next one carries the newer text anyway
        self._sequence += 1
        entity = StreamInfoEntity(stream_type=kind, stream_id=self.stream_id, stream_sequence=self._sequence)
        try:
            response = await self._context.send_activity(
                Activity(type=ActivityTypes.typing, text=text, entities=[entity])
            )
        except ErrorResponseException as exc:
            self._raise_if_stopped(exc)
            status, code, message = refusal(exc)
            log.warning(
                "Teams refused a streaming update (%d %s: %s): the answer goes as one message",
                status,
                code or "-",
                message[:200],
            )
            self.open = False
            return
        if self.stream_id is None and response is not None:
            self.stream_id = response.id
        self._last, self._last_text = now, text

    def _raise_if_stopped(self, exc: ErrorResponseException) -> None:
        """TurnStopped when Teams refused the stream because the user pressed Stop (only an opened
        stream can be stopped: a refused first update is no Stop)."""
        if self.stream_id is not None and user_stopped(exc):
            self.open = False
            log.info("the user stopped the streamed answer (after %d updates)", self._sequence)
            raise TurnStopped from None
