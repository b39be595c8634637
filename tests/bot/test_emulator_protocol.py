"""The Emulator's protocol end to end: the real `python app.py`, a fake Bot Connector on 127.0.0.1.

The Emulator posts activities with its own local server as serviceUrl and no Authorization header;
the bot answers each POST after it has posted its replies to that serviceUrl.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from cards.welcome_card import example_actions
from tests.fakes.bot_connector import FakeConnector, card_of, card_text, find_by_id, make_activity
from tests.paths import SAMPLE_DOCS, SHARED_EVAL
from tests.servers.app_process import AppProcess


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppProcess]:
    proc = AppProcess(tmp_path_factory.mktemp("app"), SAMPLE_DOCS)
    proc.start()
    yield proc
    proc.stop()


async def post(
    app: AppProcess, activity: dict[str, Any] | str, content_type: str = "application/json"
) -> int:
    data = activity if isinstance(activity, str) else json.dumps(activity)
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            app.url + "/api/messages", data=data.encode(), headers={"Content-Type": content_type}
        ) as resp,
    ):
        return resp.status


def feedback_rows(db: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("SELECT * FROM answer_feedback ORDER BY id")]


def test_health_reports_index_and_providers(app: AppProcess) -> None:
    health = app.health()
    assert health["status"] == "ok"
    assert health["documents"] == len([p for p in SAMPLE_DOCS.iterdir() if p.suffix in (".md", ".txt")])
    assert health["chunks"] > health["documents"]
    assert health["providers"]["web"] == "off"


async def test_conversation_update_welcome_question_and_thumbs_up(
    app: AppProcess, connector: FakeConnector
) -> None:
    conv = "conv-emulator-1"
    added = make_activity(
        connector.url,
        type="conversationUpdate",
        conversation_id=conv,
        membersAdded=[{"id": "user-1", "name": "User"}, {"id": "bot-1", "name": "Bot"}],
    )
    assert await post(app, added) in (200, 201)
    welcome = connector.messages()
    assert len(welcome) == 1
    welcome_card = card_of(welcome[0])
    assert welcome_card and "internal documents" in card_text(welcome_card)
    examples = [a for a in example_actions(welcome_card) if a["data"]["action"] == "crag.ask"]
    assert len(examples) == 3  # example questions that ask themselves
    # Replies go where the Emulator expects them, without credentials (auth is off).
    assert connector.requests[0]["path"].startswith(f"/v3/conversations/{conv}/activities")
    assert "Authorization" not in connector.requests[0]["headers"]

    before = len(connector.activities)
    question = make_activity(
        connector.url, text="有給休暇の繰越しは最大何日までできますか？", conversation_id=conv, locale="ja-JP"
    )
    assert await post(app, question) == 201
    sent = connector.activities[before:]
    # Replies to a message go to its reply URL; the typing indicator comes before the answer.
    assert {a["_path"] for a in sent} == {f"/v3/conversations/{conv}/activities/{question['id']}"}
    assert sent[0]["type"] == "typing"  # the typing indicator comes before the answer
    cards = [card_of(a) for a in sent if card_of(a)]
    assert len(cards) == 1
    card = cards[0]
    assert card["version"] == "1.5"
    answer = find_by_id(card, "answer")
    assert answer and "20日" in answer["text"]
    cited = find_by_id(card, "cited_files")
    assert cited and "leave_policy.md" in cited["text"]
    branch = find_by_id(card, "branch")
    assert branch and "社内文書" in branch["text"]
    assert "Web 検索は設定されていない" in card_text(card) or branch["text"].startswith("📄")
    assert len(json.dumps(card, ensure_ascii=False).encode()) < 28_000

    up = next(a for a in card["actions"] if a["data"]["reaction"] == "up")
    assert up["type"] == "Action.Submit"
    before = len(connector.activities)
    click = make_activity(connector.url, value=up["data"], conversation_id=conv, locale="ja-JP")
    assert await post(app, click) == 201
    ack = connector.messages(before)
    assert len(ack) == 1 and "👍" in ack[0]["text"]

    rows = [r for r in feedback_rows(app.feedback_db) if r["conversation_id"] == conv]
    assert len(rows) == 1
    row = rows[0]
    assert row["reaction"] == "up"
    assert row["question"] == "有給休暇の繰越しは最大何日までできますか？"
    assert "20日" in row["answer"]
    assert row["branch"] in ("correct", "ambiguous")
    assert "leave_policy.md" in json.loads(row["cited_files"])
    assert row["user_id"] == "user-1" and row["created_at"]


async def test_bad_input_gets_polite_replies(app: AppProcess, connector: FakeConnector) -> None:
    conv = "conv-bad-input"
    cases = [
        (make_activity(connector.url, text="   ", conversation_id=conv), "type a question"),
        (make_activity(connector.url, text="x" * 20_000, conversation_id=conv), "too long"),
        (
            make_activity(
                connector.url,
                value={"action": "crag.feedback", "result_id": "0" * 32, "reaction": "up"},
                conversation_id=conv,
            ),
            # Well formed, but of no answer given here: kept apart, and the user told so.
            "kept apart from the answers' ratings",
        ),
        (
            make_activity(
                connector.url,
                value={
                    "action": "crag.feedback",
                    "result_id": "'; DROP TABLE answers; --",
                    "reaction": "love",
                },
                conversation_id=conv,
            ),
            "couldn't record",
        ),
        (
            make_activity(connector.url, value=["not", "an", "object"], conversation_id=conv),
            "couldn't record",
        ),
    ]
    for activity, expected in cases:
        before = len(connector.activities)
        assert await post(app, activity) == 201
        replies = connector.messages(before)
        assert len(replies) == 1, replies
        assert expected in replies[0]["text"]
        assert "Traceback" not in replies[0]["text"]
    assert not [r for r in feedback_rows(app.feedback_db) if r["conversation_id"] == conv]


async def test_help_and_mention_removal(app: AppProcess, connector: FakeConnector) -> None:
    help_msg = make_activity(
        connector.url,
        text="<at>CRAG Assistant</at> help",
        entities=[
            {
                "type": "mention",
                "text": "<at>CRAG Assistant</at>",
                "mentioned": {"id": "bot-1", "name": "CRAG Assistant"},
            }
        ],
    )
    assert await post(app, help_msg) == 201
    replies = connector.messages()
    assert len(replies) == 1 and "How to use" in replies[0]["text"]


@pytest.mark.parametrize(
    ("body", "content_type", "status"),
    [
        ("{not json", "application/json", 400),
        ('{"type": "message"}', "text/plain", 415),
        ("[1, 2]", "application/json", 400),
        ('{"type": "message", "text": "hi", "conversation": {"id": "c"}}', "application/json", 400),
    ],
)
async def test_malformed_http_requests_are_client_errors(
    app: AppProcess, body: str, content_type: str, status: int
) -> None:
    assert await post(app, body, content_type) == status


@pytest.fixture(scope="module")
def jsquad_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppProcess]:
    corpus = SHARED_EVAL / "jsquad-dev" / "corpus"
    if not corpus.is_dir():
        pytest.skip(f"shared evaluation data not found at {corpus}")
    proc = AppProcess(tmp_path_factory.mktemp("jsquad"), corpus)
    proc.start()
    yield proc
    proc.stop()


async def test_unseen_folder_answer_cites_gold_file(jsquad_app: AppProcess, connector: FakeConnector) -> None:
    """On a folder it has never seen, the first in-corpus questions get cards citing their file."""
    questions = [
        json.loads(line)
        for line in (SHARED_EVAL / "jsquad-dev" / "questions.jsonl").read_text("utf-8").splitlines()
    ]
    in_corpus = [q for q in questions if q["in_corpus"]][:3]
    for i, q in enumerate(in_corpus):
        before = len(connector.activities)
        msg = make_activity(connector.url, text=q["question"], conversation_id=f"jsq-{i}", locale="ja-JP")
        assert await post(jsquad_app, msg) == 201
        card = next(card_of(a) for a in connector.activities[before:] if card_of(a))
        assert card is not None
        assert q["gold_file"] in (find_by_id(card, "cited_files") or {}).get("text", ""), q
        answer = (find_by_id(card, "answer") or {}).get("text", "")
        assert any(a in answer for a in q["answers"]), (q, answer)
