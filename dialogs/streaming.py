"""Streaming in Teams 1:1 chats: informative updates while the engine works, the answer text as the
model writes it, then the final message (which alone carries the card, the AI label, citations and
the feedback buttons).

Teams reads `streaminfo` entities on typing activities: the first update returns the stream id that
every later one names, with an increasing sequence number; about one update per 1.5 s is allowed.
Group chats, channels, the Emulator and Web Chat get the plain typing indicator instead.
"""

from __future__ import annotations

import re
import time
from typing import Any, ClassVar

from botbuilder.core import TurnContext
from botbuilder.schema import Activity, ActivityTypes, Entity

from crag.core.models import CITATION_MARKER
from service.texts import Lang, t

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

    async def on_stage(self, stage: str) -> None:
        await self._send("informative", t(f"stage.{stage}", self._lang), first=self.stream_id is None)

    async def on_text(self, text: str) -> None:
        # Source numbers are renumbered in the final message: leave them out of the preview.
        await self._send("streaming", _MARKER.sub("", text))

    def finish(self, reply: Activity) -> Activity:
        """Mark the final message as closing the stream (when one was opened)."""
        if self.stream_id is not None:
            reply.entities = [
                *(reply.entities or []),
                StreamInfoEntity(stream_type="final", stream_id=self.stream_id),
            ]
        return reply

    async def _send(self, kind: str, text: str, first: bool = False) -> None:
        now = time.monotonic()
        if not first and (now - self._last < self._interval or text == self._last_text):
            return  # Teams throttles faster updates; the next one carries the newer text anyway
        self._sequence += 1
        entity = StreamInfoEntity(stream_type=kind, stream_id=self.stream_id, stream_sequence=self._sequence)
        response = await self._context.send_activity(
            Activity(type=ActivityTypes.typing, text=text, entities=[entity])
        )
        if self.stream_id is None and response is not None:
            self.stream_id = response.id
        self._last, self._last_text = now, text
