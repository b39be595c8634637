"""Teams' Stop button while an answer streams, against the real app, a fake Bot Connector that answers
as Teams does (403 ContentStreamNotAllowed once the user stopped) and a fake OpenAI server that streams.

The turn ends quietly: no error text, no further update, no answer; it is stored as stopped (the
dashboard counts it) and its span says so. A streaming update refused for another reason ends
streaming, not the turn: the answer comes as one plain message."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.bot_connector import FakeConnector, make_activity
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.otlp import FakeCollector
from tests.servers.app_harness import serve_app

QUESTION = "How many days a week can I work from home?"
ERROR_TEXTS = ("went wrong", "error", "エラー", "問題が発生")


@pytest.fixture
async def llm() -> AsyncIterator[FakeOpenAI]:
    fake = FakeOpenAI()
    await fake.start()
    yield fake
    await fake.stop()


def personal(connector: FakeConnector, text: str, conv: str = "a:stop") -> dict[str, Any]:
    activity = make_activity(connector.url, channel_id="msteams", conversation_id=conv, text=text)
    activity["conversation"] = {"id": conv, "conversationType": "personal", "tenantId": "tenant-1"}
    activity["channelData"] = {"tenant": {"id": "tenant-1"}}
    return activity


def stored(db: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("SELECT * FROM answers ORDER BY rowid")]


def settings(tmp_path: Path, llm: FakeOpenAI, **more: Any) -> dict[str, Any]:
    return {
        "OPENAI_API_KEY": "sk-stop",
        "OPENAI_BASE_URL": llm.url + "/v1",
        "CRAG_EMBEDDINGS": "off",
        "CRAG_STREAM_INTERVAL": "0",  # every stage and every piece of text is an update
        "STATE_STORAGE": "memory",
        **more,
    }


def no_error_text(connector: FakeConnector) -> None:
    texts = [str(a.get("text") or "").lower() for a in connector.activities if a.get("type") == "message"]
    assert not any(e in t for t in texts for e in ERROR_TEXTS), texts


async def test_stop_mid_stream_ends_the_turn_quietly_and_is_recorded(
    tmp_path: Path, connector: FakeConnector, llm: FakeOpenAI
) -> None:
    collector = FakeCollector()
    await collector.start()
    connector.stop_after_updates = 1  # the user pressed Stop as soon as the first update showed
    try:
        async with serve_app(
            tmp_path, ready=True, OTEL_EXPORTER_OTLP_ENDPOINT=collector.url, **settings(tmp_path, llm)
        ) as (client, _):
            response = await client.post("/api/messages", json=personal(connector, QUESTION))
            assert response.status == 201
            # The refused update was the last thing sent: no final message, no error text after it.
            assert len(connector.refused) == 1
            assert connector.activities[-1]["type"] == "typing"
            assert connector.messages() == []
            no_error_text(connector)

            # The next question of the conversation is answered, and the stopped one was not
            # remembered: it does not lean on it.
            connector.stop_after_updates = None
            response = await client.post("/api/messages", json=personal(connector, QUESTION))
            assert response.status == 201
            [answer] = await connector.wait_for_messages(1)
            assert answer["attachments"]
        (first, second) = await collector.wait_for("crag.turn", count=2, timeout=5.0)
    finally:
        await collector.stop()
    assert first.attributes["crag.stopped"] is True
    assert "crag.branch" not in first.attributes and first.status_code != 2  # 2: ERROR
    assert "crag.stopped" not in second.attributes and second.attributes["crag.branch"]
    rows = stored(tmp_path / "feedback.sqlite3")
    assert [r["stopped"] for r in rows] == [1, 0]
    assert rows[0]["question"] == QUESTION and rows[0]["answer"] == "" and rows[0]["channel_id"] == "msteams"


async def test_stop_after_the_last_update_keeps_the_answer_stored_as_stopped(
    tmp_path: Path, connector: FakeConnector, llm: FakeOpenAI
) -> None:
    connector.stop_at_final = True
    async with serve_app(tmp_path, ready=True, **settings(tmp_path, llm)) as (client, _):
        response = await client.post("/api/messages", json=personal(connector, QUESTION))
        assert response.status == 201
    [refused] = connector.refused
    assert refused["type"] == "message" and refused["attachments"]  # the final, with its card
    assert connector.messages() == []
    no_error_text(connector)
    [row] = stored(tmp_path / "feedback.sqlite3")
    assert row["stopped"] == 1 and row["answer"] and row["branch"]


@pytest.mark.parametrize(
    "refusal",
    [
        (400, "BadArgument", "Streaming api is not enabled"),
        (403, "ContentStreamNotAllowed", "Content stream finished due to exceeded streaming time."),
    ],
    ids=["streaming-not-enabled", "stream-time-limit"],
)
async def test_an_update_refused_for_another_reason_ends_streaming_not_the_turn(
    tmp_path: Path, connector: FakeConnector, llm: FakeOpenAI, refusal: tuple[int, str, str]
) -> None:
    connector.refuse_updates = refusal
    async with serve_app(tmp_path, ready=True, **settings(tmp_path, llm)) as (client, _):
        response = await client.post("/api/messages", json=personal(connector, QUESTION))
        assert response.status == 201
    # One refused update, then no more tries; the answer comes whole, without stream entities.
    assert len(connector.refused) == 1
    [answer] = connector.messages()
    assert answer["attachments"]
    assert all(e.get("type") != "streaminfo" for e in answer.get("entities") or [])
    [row] = stored(tmp_path / "feedback.sqlite3")
    assert row["stopped"] == 0
