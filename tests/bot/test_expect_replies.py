"""deliveryMode expectReplies: the bot's replies come back in the HTTP response (a skill's caller,
Copilot Studio, test clients). botbuilder 4.17 answered every such request with a 500
(bot/channel/adapter.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from botbuilder.core import TurnContext, serializer_helper
from botbuilder.core.cloud_adapter_base import CloudAdapterBase
from botbuilder.integration.aiohttp import CloudAdapter
from botbuilder.schema import Activity

from bot.channel.adapter import BotAdapter, response_body
from tests.fakes.bot_connector import card_of, card_text, make_activity
from tests.servers.app_harness import serve_app


async def test_an_expect_replies_activity_gets_its_answer_card_in_the_response(tmp_path: Path) -> None:
    async with serve_app(tmp_path, ready=True) as (client, _app):
        # Nothing listens on the serviceUrl: the replies must not be posted there.
        question = "What is the monthly remote work allowance?"
        activity = make_activity("http://127.0.0.1:9/", text=question, deliveryMode="expectReplies")
        resp = await client.post("/api/messages", json=activity)
        assert resp.status == 200
        replies = (await resp.json())["activities"]
    messages = [a for a in replies if a["type"] == "message"]
    assert messages and all(a["replyToId"] == activity["id"] for a in messages)
    card = next(card_of(a) for a in messages if card_of(a))
    assert "4,000" in card_text(card)  # sample_docs' remote work policy: ¥4,000 a month


def test_botbuilder_417_cannot_write_its_own_expect_replies_body() -> None:
    """The defect bot/channel/adapter.py works around, on the SDK's own path: CloudAdapterBase's
    _process_turn_results turns the ExpectedReplies into a dict, and the serializer_helper the
    aiohttp CloudAdapter writes every response body with fails on a dict (the request's 500)."""
    context = TurnContext(CloudAdapter(), Activity(type="message", delivery_mode="expectReplies"))
    context.buffered_reply_activities.append(Activity(type="message", text="hello"))
    stock = CloudAdapterBase._process_turn_results(CloudAdapter(), context)
    with pytest.raises(AttributeError):
        serializer_helper(stock.body)
    ours = BotAdapter()._process_turn_results(context)
    assert response_body(ours.body) == {"activities": [{"type": "message", "text": "hello"}]}
