"""Each client's rating lands on exactly the answer it was given for, or is kept unattributed, never on
another answer, against the real app (`python app.py`) and a fake Bot Connector:

- Teams' native feedback invoke naming a streamed answer by its stream id, or by the id its final
  message was sent under; one naming no message (what the Agents Playground sends), one naming an
  unknown message, one naming a message of another conversation;
- a card's 👍 (Action.Submit: the Emulator, and Teams' fallback) and Action.Execute carrying the
  result id, including one of an answer given in another conversation.

Two answers are given in each conversation and the OLDER one is rated, so that a fallback to "the
conversation's latest answer" would show as a rating on the wrong answer.
(Web Chat's own path: tests/webchat/test_webchat_app.py.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.bot.test_teams import post, rows, teams
from tests.fakes.bot_connector import FakeConnector, card_of, card_text, make_activity
from tests.paths import SAMPLE_DOCS
from tests.servers.app_process import AppProcess

OLDER = "What is the monthly remote work allowance?"
LATEST = "How do I get a Wi-Fi code for a visitor?"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppProcess]:
    proc = AppProcess(tmp_path_factory.mktemp("clients"), SAMPLE_DOCS, CRAG_STREAM_INTERVAL="0")
    proc.start()
    yield proc
    proc.stop()


def stored(app: AppProcess, conversation: str) -> dict[str, str]:
    """question -> result id of the answers stored in `conversation`."""
    return {
        r["question"]: r["result_id"]
        for r in rows(app.feedback_db, "answers")
        if r["conversation_id"] == conversation
    }


def ratings(app: AppProcess, conversation: str) -> list[dict[str, Any]]:
    return [r for r in rows(app.feedback_db, "answer_feedback") if r["conversation_id"] == conversation]


def unattributed(app: AppProcess, conversation: str) -> list[dict[str, Any]]:
    return [r for r in rows(app.feedback_db, "unattributed_feedback") if r["conversation_id"] == conversation]


def native(connector: FakeConnector, conversation: str, user: str, reply_to: str | None) -> dict[str, Any]:
    extra = {"replyToId": reply_to} if reply_to is not None else {}
    activity = teams(
        connector,
        type="invoke",
        name="message/submitAction",
        conv=conversation,
        conv_type="personal",
        value={
            "actionName": "feedback",
            "actionValue": {"reaction": "like", "feedback": json.dumps({"feedbackText": f"by {user}"})},
        },
        **extra,
    )
    activity["from"] = {"id": user, "name": user}
    return activity


async def test_teams_feedback_lands_on_the_answer_each_id_names(
    app: AppProcess, connector: FakeConnector
) -> None:
    conversation = "a:personal-ids"
    ids: dict[str, dict[str, str]] = {}
    for question in (OLDER, LATEST):
        before = len(connector.activities)
        status, _ = await post(app, teams(connector, text=question, conv=conversation, conv_type="personal"))
        assert status == 201
        sent = connector.activities[before:]
        typing = [a for a in sent if a["type"] == "typing"]
        [final] = [a for a in sent if a["type"] == "message"]
        # Streamed: the first update's id is the stream's; the final message got an id of its own.
        ids[question] = {"stream": typing[0]["id"], "sent": final["id"]}
        assert ids[question]["stream"] != ids[question]["sent"]
    answers = stored(app, conversation)
    assert set(answers) == {OLDER, LATEST}

    # The older answer named by its stream id (user-a) and by its final message's id (user-b).
    for user, kind in (("user-a", "stream"), ("user-b", "sent")):
        status, body = await post(app, native(connector, conversation, user, ids[OLDER][kind]))
        assert (status, body) == (200, {})
    on = {r["user_id"]: r["result_id"] for r in ratings(app, conversation)}
    assert on == {"user-a": answers[OLDER], "user-b": answers[OLDER]}

    # No id, an unknown one, and the id of an answer of another conversation: kept apart, acknowledged.
    other = "a:personal-other"
    await post(app, teams(connector, text=OLDER, conv=other, conv_type="personal"))
    [foreign] = [a for a in connector.activities if a["type"] == "message" and other in a["_path"]]
    for user, named in (("user-c", None), ("user-d", "no-such-message"), ("user-e", foreign["id"])):
        status, body = await post(app, native(connector, conversation, user, named))
        assert (status, body) == (200, {})
    assert {r["user_id"] for r in ratings(app, conversation)} == {"user-a", "user-b"}  # none on LATEST
    apart = {r["user_id"]: r for r in unattributed(app, conversation)}
    assert {u: (r["named_id"], r["reaction"], r["comment"], r["source"]) for u, r in apart.items()} == {
        "user-c": ("", "up", "by user-c", "teams"),
        "user-d": ("no-such-message", "up", "by user-d", "teams"),
        "user-e": (foreign["id"], "up", "by user-e", "teams"),
    }
    assert ratings(app, other) == []
    log = app.log()
    assert "names no message (no replyToId)" in log and "names unknown message no-such-message" in log


async def test_card_feedback_lands_on_the_answer_its_result_id_names(
    app: AppProcess, connector: FakeConnector
) -> None:
    conversation = "emulator-cards"
    cards: dict[str, dict[str, Any]] = {}
    for question in (OLDER, LATEST):
        before = len(connector.activities)
        await post(app, make_activity(connector.url, text=question, conversation_id=conversation))
        [reply] = connector.messages(before)
        card = card_of(reply)
        assert card is not None
        cards[question] = card
    answers = stored(app, conversation)

    # The Emulator's Action.Submit on the older answer's 👍.
    up = next(a["data"] for a in cards[OLDER]["actions"] if a["data"]["reaction"] == "up")
    before = len(connector.activities)
    await post(app, make_activity(connector.url, value=up, conversation_id=conversation, user_id="u-submit"))
    assert "👍" in connector.messages(before)[0]["text"]
    # Action.Execute (cards of earlier releases in Teams) on the older answer's 👎.
    down = next(a["data"] for a in cards[OLDER]["actions"] if a["data"]["reaction"] == "down")
    execute = make_activity(
        connector.url,
        type="invoke",
        name="adaptiveCard/action",
        value={"action": {"type": "Action.Execute", "verb": down["action"], "data": down}},
        conversation_id=conversation,
        user_id="u-execute",
    )
    status, body = await post(app, execute)
    assert status == 200 and body["statusCode"] == 200
    assert {
        (r["user_id"], r["reaction"], r["result_id"], r["source"]) for r in ratings(app, conversation)
    } == {
        ("u-submit", "up", answers[OLDER], "card"),
        ("u-execute", "down", answers[OLDER], "card-execute"),
    }

    # A card of another conversation's answer (a copied or edited click): kept apart with the id it
    # named, the user told so, and no answer of this conversation rated.
    elsewhere = "emulator-cards-other"
    before = len(connector.activities)
    await post(app, make_activity(connector.url, text=LATEST, conversation_id=elsewhere))
    [reply] = connector.messages(before)
    foreign = next(a["data"] for a in (card_of(reply) or {})["actions"] if a["data"]["reaction"] == "up")
    before = len(connector.activities)
    await post(
        app, make_activity(connector.url, value=foreign, conversation_id=conversation, user_id="u-copy")
    )
    assert "kept apart" in connector.messages(before)[0]["text"]
    execute["value"]["action"]["data"] = foreign
    execute["from"]["id"] = "u-copy-execute"
    status, body = await post(app, execute)
    assert status == 200 and "kept apart" in card_text(body["value"])
    assert len(ratings(app, conversation)) == 2 and ratings(app, elsewhere) == []
    apart = {r["user_id"]: (r["named_id"], r["source"]) for r in unattributed(app, conversation)}
    assert apart == {
        "u-copy": (foreign["result_id"], "card"),
        "u-copy-execute": (foreign["result_id"], "card-execute"),
    }
