"""deliveryMode expectReplies: the bot's replies come back in the HTTP response (a skill's caller,
Copilot Studio, test clients). botbuilder 4.17 answered every such request with a 500
(bot/channel/adapter.py)."""

from __future__ import annotations

from pathlib import Path

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
