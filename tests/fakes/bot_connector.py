"""Fake services on 127.0.0.1 for tests: a Bot Connector that records what the bot sends."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from aiohttp import web

from crag.eval.loopback import LoopbackServer

# What Teams answers an activity naming a stream the user stopped.
_STOPPED = (403, "ContentStreamNotAllowed", "Content stream was cancelled by user.")


class FakeConnector(LoopbackServer):
    """Plays the Emulator's side: receives the bot's replies at {serviceUrl}/v3/conversations/..."""

    def __init__(self) -> None:
        super().__init__()
        self.activities: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []  # method, path, headers of every call
        # Teams' Stop button: after this many streaming updates are taken, every activity that names
        # the stream (updates and the final message) is refused as Teams refuses them.
        self.stop_after_updates: int | None = None
        # A refusal of every streaming update (status, code, message), for channels that refuse them.
        self.refuse_updates: tuple[int, str, str] | None = None
        self.stop_at_final = False  # Stop pressed after the last update: only the final is refused
        self.refused: list[dict[str, Any]] = []

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v3/conversations/{conversation}/activities", self._post)
        app.router.add_post("/v3/conversations/{conversation}/activities/{reply_to}", self._post)
        app.router.add_put("/v3/conversations/{conversation}/activities/{activity}", self._post)

    async def _post(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(
            {"method": request.method, "path": request.path, "headers": dict(request.headers)}
        )
        refusal = self._refusal(body)
        if refusal is not None:
            self.refused.append(body)
            status, code, message = refusal
            return web.json_response({"error": {"code": code, "message": message}}, status=status)
        body["_path"] = request.path
        body.setdefault("id", uuid.uuid4().hex)
        self.activities.append(body)
        return web.json_response({"id": body["id"]})

    def _refusal(self, body: dict[str, Any]) -> tuple[int, str, str] | None:
        info = next((e for e in body.get("entities") or [] if e.get("type") == "streaminfo"), None)
        if info is None:
            return None
        if self.refuse_updates is not None and info.get("streamType") != "final":
            return self.refuse_updates
        if self.stop_at_final and info.get("streamType") == "final":
            return _STOPPED
        if self.stop_after_updates is None or "streamId" not in info:
            return None
        updates = sum(
            1
            for a in self.activities
            if any(e.get("streamId") == info["streamId"] for e in a.get("entities") or [])
            or a.get("id") == info["streamId"]
        )
        if updates >= self.stop_after_updates:
            return _STOPPED
        return None

    def messages(self, since: int = 0) -> list[dict[str, Any]]:
        return [a for a in self.activities[since:] if a.get("type") == "message"]

    async def wait_for_messages(
        self, count: int, since: int = 0, timeout: float = 10.0
    ) -> list[dict[str, Any]]:
        deadline = asyncio.get_running_loop().time() + timeout
        while len(self.messages(since)) < count:
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.05)
        return self.messages(since)


def make_activity(
    connector_url: str,
    *,
    type: str = "message",
    text: str | None = None,
    value: Any = None,
    conversation_id: str = "conv-1",
    user_id: str = "user-1",
    locale: str = "en-US",
    channel_id: str = "emulator",
    **extra: Any,
) -> dict[str, Any]:
    activity: dict[str, Any] = {
        "type": type,
        "id": uuid.uuid4().hex,
        "timestamp": "2026-11-29T10:00:00.000Z",
        "serviceUrl": connector_url,
        "channelId": channel_id,
        "from": {"id": user_id, "name": "User", "role": "user"},
        "conversation": {"id": conversation_id},
        "recipient": {"id": "bot-1", "name": "CRAG Assistant", "role": "bot"},
        "locale": locale,
    }
    if text is not None:
        activity["text"] = text
    if value is not None:
        activity["value"] = value
    activity.update(extra)
    return activity


def card_of(activity: dict[str, Any]) -> dict[str, Any] | None:
    for attachment in activity.get("attachments") or []:
        if attachment.get("contentType") == "application/vnd.microsoft.card.adaptive":
            return attachment["content"]  # type: ignore[no-any-return]
    return None


def card_text(card: dict[str, Any]) -> str:
    """Every text of a card, flattened, for assertions."""
    out: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key in ("text", "title", "value"):
                if isinstance(node.get(key), str):
                    out.append(node[key])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(card)
    return "\n".join(out)


def find_by_id(card: dict[str, Any], element_id: str) -> dict[str, Any] | None:
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("id") == element_id:
                found.append(node)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(card)
    return found[0] if found else None
