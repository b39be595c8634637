"""Odd input is a client error or gets an answer, never a 5xx, a dead turn or a forged log line.

The app runs in process (app.create_app, no app id) and replies to a FakeConnector on 127.0.0.1.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import app as app_module
from hosting.ui_texts import t
from tests.fakes.bot_connector import FakeConnector, make_activity
from tests.servers.app_harness import Client, serve_app
from tests.servers.webchat_harness import post_message, start, webchat_app

DEEP = ("[" * 5000 + "]" * 5000).encode()


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[tuple[Client, Any]]:
    async with serve_app(tmp_path, ready=True) as served:
        yield served


async def _post(client: Client, body: Any) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = await client.post("/api/messages", data=data, headers={"Content-Type": "application/json"})
    text = await response.text()
    return response.status, json.loads(text) if text else None


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


async def test_deeply_nested_json_is_400_not_a_recursion_error(
    local: tuple[Client, Any], connector: FakeConnector
) -> None:
    client, _ = local
    assert (await _post(client, DEEP))[0] == 400
    activity = make_activity(connector.url, text="hi", value=json.loads("[" * 100 + "]" * 100))
    assert (await _post(client, activity))[0] == 400  # deeper than any activity needs (64)
    ok = make_activity(connector.url, text="help", value={"a": [{"b": [{"c": 1}]}]})
    assert (await _post(client, ok))[0] == 201


async def test_shapes_that_crashed_the_turn(
    local: tuple[Client, Any], connector: FakeConnector, caplog: pytest.LogCaptureFixture
) -> None:
    client, _ = local
    odd_ids: list[Any] = [None, "", 42, "a\nINFO forged", "c\u2028INFO forged", "a b", {"x": 1}]
    for conversation in [*({"id": i} for i in odd_ids), {}]:
        activity = make_activity(connector.url, text="help", conversation=conversation)
        assert (await _post(client, activity))[0] == 400, conversation
    # A mention entity without "mentioned" (the SDK's mention removal raised KeyError): answered.
    mention = make_activity(
        connector.url,
        text="<at>Someone</at> help",
        conversation_id="c-mention",
        entities=[{"type": "mention", "text": "<at>Someone</at>"}, {"type": "mention"}],
    )
    assert (await _post(client, mention))[0] == 201
    replies = await connector.wait_for_messages(1)
    assert replies and replies[0].get("text") != t("error", "en")
    assert not _errors(caplog)


async def test_unknown_invoke_is_200_with_a_501_invoke_body(
    local: tuple[Client, Any], connector: FakeConnector
) -> None:
    client, _ = local
    status, body = await _post(client, make_activity(connector.url, type="invoke", name="some/unknownInvoke"))
    assert status == 200
    assert body["statusCode"] == 501 and body["type"] == "application/vnd.microsoft.error"


async def test_lone_surrogate_still_gets_an_answer(
    local: tuple[Client, Any], connector: FakeConnector, caplog: pytest.LogCaptureFixture
) -> None:
    client, _ = local
    # json.dumps writes "\ud800" as an escape: the body is valid JSON, the text is not valid Unicode.
    activity = make_activity(connector.url, text="\ud800 leave days", conversation_id="c-surrogate")
    assert (await _post(client, activity))[0] == 201
    replies = await connector.wait_for_messages(1)
    assert len(replies) == 1 and replies[0].get("attachments"), replies  # the answer card
    assert not _errors(caplog)


async def test_every_message_turn_ends_with_a_reply(
    local: tuple[Client, Any], connector: FakeConnector, caplog: pytest.LogCaptureFixture
) -> None:
    client, application = local
    engine = application[app_module.RUNTIME].handle.engine

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    engine.run = broken  # fails after the typing indicator went out
    activity = make_activity(connector.url, text="How many leave days?", id="act\nINFO forged line")
    assert (await _post(client, activity))[0] == 201
    replies = await connector.wait_for_messages(1)
    assert [r["text"] for r in replies] == [t("error", "en")]
    assert [a["type"] for a in connector.activities] == ["typing", "message"]
    # The activity id is logged escaped: no line of the log starts with the forged text.
    turn_errors = [r.getMessage() for r in caplog.records if "unhandled error in turn" in r.getMessage()]
    assert turn_errors and all("\n" not in m and "act\\nINFO" in m for m in turn_errors), turn_errors


async def test_user_values_are_escaped_in_log_lines(
    local: tuple[Client, Any], connector: FakeConnector, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    client, _ = local
    kind = "x\u2028INFO forged\r\nERROR forged"
    assert (await _post(client, make_activity(connector.url, type=kind)))[0] == 201
    lines = [r.getMessage() for r in caplog.records if "ignored activity" in r.getMessage()]
    assert lines == ["ignored activity of type x\\u2028INFO forged\\r\\nERROR forged"]


async def test_local_directline_odd_tokens_and_deep_bodies_are_4xx() -> None:
    async with webchat_app() as h:
        for token in ("ldl1.abc.\u00e9\u00e9", "ldl1.\u00e9.x", "\u00e9"):
            response = await h.client.post(
                "/v3/directline/conversations",
                headers={"Authorization": f"Bearer {token}".encode().decode("latin-1")},
            )
            assert response.status == 401, token
        session = await start(h.client)
        response = await h.client.post(
            f"{session.path}/activities",
            data=DEEP,
            headers={**session.headers, "Content-Type": "application/json"},
        )
        assert response.status == 400
        status, _ = await post_message(h.client, session, text="still fine")
        assert status == 200
        # A non-ASCII connector key in the path (hmac.compare_digest raised TypeError on it).
        response = await h.client.post(
            "/webchat/connector/%C3%A9/v3/conversations/x/activities", json={"type": "message"}
        )
        assert response.status == 404


def test_log_escaping_helper() -> None:
    from hosting.logsafe import esc

    assert esc("a\nb\r\u2028\x1b[2J\ud800\\n") == "a\\nb\\r\\u2028\\x1b[2J\\ud800\\\\n"
    assert esc("有給休暇") == "有給休暇"
    assert esc("x" * 500, limit=10) == "x" * 10 + "…"
    assert esc(None) == "None"
