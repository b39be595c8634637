"""What goes into a local Direct Line conversation: checked user activities, bot replies, the start.

A client chooses only the content of its activities; who sent them, where, and when is set here
from its token, as Direct Line does, so a page cannot speak as someone else or as the bot.
"""

from __future__ import annotations

import re
from typing import Any

from webchat.errors import ApiError

CHANNEL_ID = "webchat"
BOT_ID = "bot"
# Types a client may post; "message" carries text or a card button's `value` (Action.Submit).
USER_TYPES = frozenset({"message", "event", "typing"})
# Fields a client may set; anything else (serviceUrl, from, recipient, conversation, id, ...) is ours.
_USER_FIELDS = (
    "type",
    "text",
    "textFormat",
    "locale",
    "localTimestamp",
    "localTimezone",
    "value",
    "name",
    "attachments",
    "attachmentLayout",
    "channelData",
    "entities",
    "speak",
    "inputHint",
    "replyToId",
)
_STRING_FIELDS = ("text", "textFormat", "locale", "localTimestamp", "localTimezone", "name", "speak")
_MAX_NAME_CHARS = 100
_LANGUAGE_TAG = re.compile(r"^[A-Za-z]{2,3}(?:-[A-Za-z0-9]{2,8}){0,3}$")


def account(account_id: str, name: str, role: str) -> dict[str, str]:
    return {"id": account_id, "name": name, "role": role}


def user_activity(body: Any, conversation_id: str, user_id: str, bot: dict[str, str]) -> dict[str, Any]:
    """The activity as stored and as the bot receives it, from what a client posted (400 if invalid)."""
    if not isinstance(body, dict):
        raise ApiError(400, "BadArgument", "the body must be a JSON object (an activity)")
    kind = body.get("type")
    if kind not in USER_TYPES:
        raise ApiError(400, "BadArgument", f"activity type must be one of {sorted(USER_TYPES)}")
    for key in _STRING_FIELDS:
        if key in body and body[key] is not None and not isinstance(body[key], str):
            raise ApiError(400, "BadArgument", f"'{key}' must be a string")
    for key in ("attachments", "entities"):
        items = body.get(key)
        if items is not None and not (isinstance(items, list) and all(isinstance(i, dict) for i in items)):
            raise ApiError(400, "BadArgument", f"'{key}' must be a list of objects")
    if body.get("channelData") is not None and not isinstance(body["channelData"], dict):
        # Web Chat puts clientActivityID here, which the echo must carry back unchanged.
        raise ApiError(400, "BadArgument", "'channelData' must be an object")
    sender = body.get("from")
    name = sender.get("name") if isinstance(sender, dict) else None
    activity = {key: body[key] for key in _USER_FIELDS if body.get(key) is not None}
    activity["channelId"] = CHANNEL_ID
    activity["conversation"] = {"id": conversation_id}
    activity["from"] = account(user_id, name[:_MAX_NAME_CHARS] if isinstance(name, str) else "", "user")
    activity["recipient"] = bot
    return activity


def bot_activity(body: Any, conversation_id: str, user_id: str, bot: dict[str, str]) -> dict[str, Any]:
    """A reply the bot posted to the connector routes, as the client will read it (400 if invalid)."""
    if not isinstance(body, dict) or not isinstance(body.get("type"), str):
        raise ApiError(400, "BadArgument", "the body must be an activity")
    # serviceUrl names the connector route, whose key the browser must never learn.
    activity = {k: v for k, v in body.items() if k not in ("serviceUrl", "id", "timestamp")}
    sender = body.get("from")
    name = sender.get("name") if isinstance(sender, dict) else None
    activity["channelId"] = CHANNEL_ID
    activity["conversation"] = {"id": conversation_id}
    activity["from"] = {**bot, "name": name if isinstance(name, str) and name else bot["name"]}
    activity["recipient"] = account(user_id, "", "user")
    return activity


def members_added(
    conversation_id: str, user_id: str, bot: dict[str, str], locale: str = ""
) -> dict[str, Any]:
    """The conversationUpdate a channel sends when a conversation starts: the bot greets the user."""
    user = account(user_id, "", "user")
    activity: dict[str, Any] = {
        "type": "conversationUpdate",
        "channelId": CHANNEL_ID,
        "conversation": {"id": conversation_id},
        "from": user,
        "recipient": bot,
        "membersAdded": [bot, user],
    }
    if locale:
        activity["locale"] = locale
    return activity


def locale_of(accept_language: str | None) -> str:
    """The browser's first language ("ja-JP" from "ja-JP,ja;q=0.9,en;q=0.8"), or "".

    Web Chat puts its locale on messages only; the conversation's start has none, so without this
    the bot would greet a Japanese user in English.
    """
    first = (accept_language or "").split(",", 1)[0].split(";", 1)[0].strip()
    return first if _LANGUAGE_TAG.match(first) else ""
