"""The local Direct Line's conversations: an append-only list of activities each, read by watermark.

An activity's id is "<conversation id>|<sequence>" (Direct Line's own format) and the watermark a
client sends back is the sequence of the last activity it has seen, so polling returns only what
is new. Everything lives in memory, bounded by `LocalLimits`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from webchat.errors import ApiError
from webchat.limits import LocalLimits


@dataclass
class Conversation:
    id: str
    user_id: str
    client: str  # the client IP that started it, for the per-client limit
    last_active: float
    activities: list[dict[str, Any]] = field(default_factory=list)
    # One bot turn at a time per conversation, so replies come in the order the questions were asked.
    turn_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def watermark(self) -> int:
        return len(self.activities)


class ConversationStore:
    def __init__(self, limits: LocalLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._conversations: dict[str, Conversation] = {}

    def __len__(self) -> int:
        return len(self._conversations)

    def start(self, conversation_id: str, user_id: str, client: str) -> tuple[Conversation, bool]:
        """The conversation a token names, created on first use; (conversation, created)."""
        existing = self.get(conversation_id)
        if existing is not None:
            if existing.user_id != user_id:
                raise ApiError(403, "Forbidden", "this token is not for this conversation")
            return existing, False
        self.sweep()
        if len(self._conversations) >= self.limits.max_conversations:
            raise ApiError(503, "TooManyConversations", "the chat is busy; try again in a few minutes")
        mine = sum(1 for c in self._conversations.values() if c.client == client)
        if mine >= self.limits.max_conversations_per_client:
            raise ApiError(
                429, "TooManyConversations", "too many open conversations from this client; close some"
            )
        conversation = Conversation(conversation_id, user_id, client, self._clock())
        self._conversations[conversation_id] = conversation
        return conversation, True

    def get(self, conversation_id: str) -> Conversation | None:
        """The live conversation, or None when unknown or idle past the limit (then forgotten)."""
        conversation = self._conversations.get(conversation_id)
        if conversation is not None and self._expired(conversation, self._clock()):
            del self._conversations[conversation_id]
            return None
        return conversation

    def touch(self, conversation: Conversation) -> None:
        conversation.last_active = self._clock()

    def append(self, conversation: Conversation, activity: dict[str, Any], *, from_bot: bool) -> str:
        """Store `activity` with the next id and a server timestamp; returns the id."""
        cap = self.limits.max_activities + (self.limits.reply_headroom if from_bot else 0)
        if len(conversation.activities) >= cap:
            raise ApiError(
                403, "ConversationFull", "this conversation has reached its size limit; start a new one"
            )
        activity_id = f"{conversation.id}|{len(conversation.activities) + 1:07d}"
        activity["id"] = activity_id
        activity["timestamp"] = utc_now()
        conversation.activities.append(activity)
        return activity_id

    def since(self, conversation: Conversation, watermark: int) -> tuple[list[dict[str, Any]], int]:
        """Activities after `watermark`, and the new watermark."""
        return conversation.activities[max(0, watermark) :], conversation.watermark

    def sweep(self) -> int:
        """Forget idle conversations; returns how many."""
        now = self._clock()
        expired = [cid for cid, c in self._conversations.items() if self._expired(c, now)]
        for cid in expired:
            del self._conversations[cid]
        return len(expired)

    def _expired(self, conversation: Conversation, now: float) -> bool:
        return now - conversation.last_active > self.limits.idle_seconds


def utc_now() -> str:
    # Millisecond ISO 8601 in UTC, as the Bot Framework writes timestamps.
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
