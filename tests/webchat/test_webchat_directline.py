"""The local Direct Line, in process: the protocol Web Chat speaks (no browser), its token checks,
expiry and limits, and the connector routes the bot replies to. The bot is an echo bot behind a
real CloudAdapter, so its replies travel over HTTP to the app as they do in production."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.servers.webchat_harness import (
    bearer,
    get_token,
    poll,
    post_message,
    start,
    wait_for,
    webchat_app,
)
from webchat.accesslog import QuietWebChatAccess
from webchat.limits import LocalLimits


def is_text(text: str) -> Any:
    return lambda a: a.get("type") == "message" and a.get("text") == text


async def test_start_welcome_post_echo_and_reply_by_watermark() -> None:
    async with webchat_app() as h:
        token = await get_token(h.client)
        assert token["userId"].startswith("dl_") and len(token["userId"]) > 10
        assert token["expires_in"] == 1800
        assert token["domain"] == f"http://127.0.0.1:{h.client.port}/v3/directline"
        assert set(token) == {"token", "conversationId", "expires_in", "userId", "domain"}

        session = await start(h.client, {"Accept-Language": "ja-JP,ja;q=0.9,en;q=0.8"})
        # The bot greets on start (conversationUpdate, in the browser's language).
        welcome = await wait_for(h.client, session, is_text("welcome ja-JP"))
        assert welcome["from"] == {"id": "bot", "name": "Test Bot", "role": "bot"}
        assert welcome["id"] == f"{session.conversation_id}|0000001"
        assert session.watermark == "1"

        # The client claims another user id: the token's is used, as Direct Line does.
        status, body = await post_message(
            h.client,
            session,
            text="hello",
            locale="en-US",
            **{"from": {"id": "someone-else", "name": "Ann"}},
            channelData={"clientActivityID": "client-1"},
        )
        assert status == 200
        assert body == {"id": f"{session.conversation_id}|0000002"}
        # The POST answers after the bot's turn: echo and reply are both there on the next poll.
        new = await poll(h.client, session)
        assert [a["id"].split("|")[1] for a in new] == ["0000002", "0000003"]
        echo, reply = new
        assert echo["channelData"] == {"clientActivityID": "client-1"}
        assert echo["from"] == {"id": session.user_id, "name": "Ann", "role": "user"}
        assert echo["text"] == "hello" and echo["timestamp"].endswith("Z")
        assert reply["text"] == "echo: hello" and reply["from"]["role"] == "bot"
        assert reply["recipient"]["id"] == session.user_id
        assert session.watermark == "3"
        assert all("serviceUrl" not in a for a in session.seen)  # it names the connector key
        assert await poll(h.client, session) == [] and session.watermark == "3"

        # What the bot received: a webchat activity whose serviceUrl is this app's connector.
        inbound = h.bot.received[-1]
        assert inbound.channel_id == "webchat" and inbound.text == "hello"
        assert inbound.service_url.startswith(f"http://127.0.0.1:{h.client.port}/webchat/connector/")
        assert inbound.conversation.id == session.conversation_id
        assert inbound.from_property.id == session.user_id and inbound.recipient.id == "bot"
        assert inbound.id == echo["id"]

        # Starting again with the same token returns the same conversation (200, not 201).
        response = await h.client.post("/v3/directline/conversations", headers=session.headers)
        assert response.status == 200
        assert (await response.json())["conversationId"] == session.conversation_id


async def test_card_submit_value_reaches_the_bot() -> None:
    async with webchat_app() as h:
        session = await start(h.client)
        data = {"action": "crag.feedback", "result_id": "0" * 32, "reaction": "up"}
        status, _ = await post_message(
            h.client, session, value=data, channelData={"clientActivityID": "c2", "postBack": True}
        )
        assert status == 200
        await wait_for(h.client, session, lambda a: a.get("text", "").startswith("value: "))
        assert h.bot.received[-1].value == data


async def test_token_checks_and_refresh() -> None:
    async with webchat_app() as h:
        a = await start(h.client)
        b = await start(h.client)
        url = f"{a.path}/activities"
        for headers in (
            {},
            {"Authorization": "Basic abc"},
            bearer(""),
            bearer("garbage"),
            bearer("ldl1.x.y"),
        ):
            response = await h.client.get(url, headers=headers)
            assert response.status == 401, headers
            assert (await response.json())["error"]["code"] == "Unauthorized"
        # A token whose payload was edited (to another conversation) fails its signature.
        prefix, _, signature = a.token.split(".")
        forged = f"{prefix}.{b.token.split('.')[1]}.{signature}"
        assert (await h.client.get(url, headers=bearer(forged))).status == 401
        # A genuine token of another conversation is forbidden here.
        response = await h.client.get(url, headers=b.headers)
        assert response.status == 403 and (await response.json())["error"]["code"] == "Forbidden"

        response = await h.client.post("/v3/directline/tokens/refresh", headers=a.headers)
        assert response.status == 200
        refreshed = await response.json()
        assert refreshed["conversationId"] == a.conversation_id and refreshed["expires_in"] == 1800
        h.wall.now += 1000
        a.token = refreshed["token"]
        await poll(h.client, a)  # the refreshed token works

        h.wall.now += 1801  # past both tokens' lifetime
        for path in (url, "/v3/directline/tokens/refresh"):
            method = h.client.get if path == url else h.client.post
            response = await method(path, headers=a.headers)
            assert response.status == 403
            assert (await response.json())["error"]["code"] == "TokenExpired"


async def test_idle_conversations_expire_but_polling_does_not_keep_them() -> None:
    async with webchat_app(LocalLimits(idle_seconds=600)) as h:
        session = await start(h.client)
        h.monotonic.now += 500
        await poll(h.client, session)  # a poll is not activity
        await post_message(h.client, session, text="still here")  # a message is
        h.monotonic.now += 500
        await poll(h.client, session)
        h.monotonic.now += 101
        response = await h.client.get(f"{session.path}/activities", headers=session.headers)
        assert response.status == 404
        assert (await response.json())["error"]["code"] == "ConversationNotFound"
        status, body = await post_message(h.client, session, text="hello?")
        assert status == 404 and body["error"]["code"] == "ConversationNotFound"


async def test_activity_size_and_count_limits() -> None:
    async with webchat_app(LocalLimits(max_activities=5, reply_headroom=1)) as h:
        session = await start(h.client)
        await wait_for(h.client, session, is_text("welcome -"))
        status, body = await post_message(h.client, session, text="x" * (33 * 1024))
        assert status == 413 and body["error"]["code"] == "MessageSizeTooBig"
        status, _ = await post_message(h.client, session, text="あ" * 10_000)  # 30 KB of UTF-8 fits
        assert status == 200
        # welcome, 2 x (message + echo reply) = 5: the conversation is full for the user ...
        assert (await post_message(h.client, session, text="two"))[0] == 200
        status, body = await post_message(h.client, session, text="three")
        assert status == 403 and body["error"]["code"] == "ConversationFull"
        # ... and the bot's reply to the last question made it within the headroom.
        await wait_for(h.client, session, is_text("echo: two"))


async def test_conversations_per_client_and_request_rate() -> None:
    limits = LocalLimits(max_conversations_per_client=2, requests_per_second=1.0, request_burst=3)
    async with webchat_app(limits) as h:
        await start(h.client)
        session = await start(h.client)
        token = await get_token(h.client)
        response = await h.client.post("/v3/directline/conversations", headers=bearer(token["token"]))
        assert response.status == 429
        assert (await response.json())["error"]["code"] == "TooManyConversations"

        statuses = []
        for _ in range(5):
            response = await h.client.get(f"{session.path}/activities", headers=session.headers)
            statuses.append(response.status)
        # start() spent one of the burst of 3.
        assert statuses == [200, 200, 429, 429, 429]
        assert response.headers["Retry-After"] == "1"
        assert (await response.json())["error"]["code"] == "TooManyRequests"
        h.monotonic.now += 1.0
        assert (await h.client.get(f"{session.path}/activities", headers=session.headers)).status == 200


@pytest.mark.parametrize(
    ("method", "path", "body", "content_type", "status"),
    [
        ("POST", "/activities", "{not json", "application/json", 400),
        ("POST", "/activities", '{"type": "message", "text": "hi"}', "text/plain", 415),
        ("POST", "/activities", "[1, 2]", "application/json", 400),
        ("POST", "/activities", '{"type": "invoke", "name": "x"}', "application/json", 400),
        ("POST", "/activities", '{"text": "no type"}', "application/json", 400),
        ("POST", "/activities", '{"type": "message", "text": 42}', "application/json", 400),
        ("POST", "/activities", '{"type": "message", "channelData": "x"}', "application/json", 400),
        ("POST", "/activities", '{"type": "message", "attachments": [1]}', "application/json", 400),
        ("POST", "/activities", b'{"type": "message", "text": "\xff"}', "application/json", 400),
        ("GET", "/activities?watermark=abc", None, None, 400),
        ("GET", "/activities?watermark=-1", None, None, 400),
        ("GET", "/activities?watermark=99999999999999999999", None, None, 400),
        ("DELETE", "/activities", None, None, 405),
        ("POST", "/upload?userId=x", "{}", "application/json", 404),
        ("GET", "/../../nowhere", None, None, 404),
    ],
)
async def test_bad_requests_get_json_client_errors(
    method: str, path: str, body: str | bytes | None, content_type: str | None, status: int
) -> None:
    async with webchat_app() as h:
        session = await start(h.client)
        headers = dict(session.headers)
        if content_type:
            headers["Content-Type"] = content_type
        data = body.encode() if isinstance(body, str) else body
        response = await h.client.request(method, session.path + path, data=data, headers=headers)
        assert response.status == status
        assert response.content_type == "application/json"
        assert "error" in await response.json()


async def test_connector_routes_need_the_key_and_a_live_conversation() -> None:
    async with webchat_app() as h:
        session = await start(h.client)
        inbound = await wait_for(h.client, session, is_text("welcome -"))
        assert inbound
        service_url = h.bot.received[0].service_url
        key = service_url.rsplit("/", 1)[1]
        reply = {"type": "message", "text": "from the bot", "serviceUrl": service_url}
        wrong = f"/webchat/connector/{'x' * len(key)}/v3/conversations/{session.conversation_id}/activities"
        assert (await h.client.post(wrong, json=reply)).status == 404
        unknown = f"/webchat/connector/{key}/v3/conversations/nope/activities"
        assert (await h.client.post(unknown, json=reply)).status == 404
        right = f"/webchat/connector/{key}/v3/conversations/{session.conversation_id}/activities"
        response = await h.client.post(right, json=reply)
        assert response.status == 200
        stored = await wait_for(h.client, session, is_text("from the bot"))
        assert stored["id"] == (await response.json())["id"] and "serviceUrl" not in stored


async def test_no_local_directline_when_the_bot_has_an_app_id() -> None:
    async with webchat_app(
        MicrosoftAppId="00000000-0000-0000-0000-000000000001", MicrosoftAppPassword="pw"
    ) as h:
        response = await h.client.post("/api/directline/token")
        assert response.status == 503
        assert "DIRECT_LINE_SECRET" in (await response.json())["error"]["message"]
        assert (await h.client.post("/v3/directline/conversations", headers=bearer("x"))).status == 404


async def test_chat_page_bundle_and_missing_bundle(tmp_path: Path) -> None:
    bundle = tmp_path / "webchat.js"
    bundle.write_text("window.WebChat = {};", "utf-8")
    async with webchat_app(bundle=bundle, BOT_NAME="Helpdesk <Bot>") as h:
        response = await h.client.get("/chat")
        assert response.status == 200 and response.content_type == "text/html"
        page = await response.text()
        assert "<title>Helpdesk &lt;Bot&gt; · Web Chat</title>" in page
        assert '<script src="/chat/webchat.js"></script>' in page
        config = json.loads(page.split('id="chat-config">')[1].split("</script>")[0])
        assert config["tokenUrl"] == "/api/directline/token"
        assert "質問" in config["texts"]["hint"]["ja"] and "Ask" in config["texts"]["hint"]["en"]
        assert "有給休暇の繰越しは最大何日までできますか？" in config["examples"]
        assert "script-src 'self'" in response.headers["Content-Security-Policy"]
        js = await h.client.get("/chat/webchat.js")
        assert js.status == 200 and await js.text() == "window.WebChat = {};"
        for asset in ("chat.js", "chat.css"):
            assert (await h.client.get(f"/chat/{asset}")).status == 200
        assert (await h.client.get("/chat/..%2Fwiring.py")).status == 404

    async with webchat_app(bundle=tmp_path / "missing.js") as h:
        response = await h.client.get("/chat")
        assert response.status == 503 and response.content_type == "text/html"
        assert "./run.sh" in await response.text()
        assert (await h.client.get("/chat/webchat.js")).status == 404


async def test_cross_origin_only_for_listed_origins() -> None:
    async with webchat_app(WEBCHAT_ALLOWED_ORIGINS="https://intranet.example") as h:
        ok = {"Origin": "https://intranet.example", "Access-Control-Request-Method": "POST"}
        response = await h.client.options("/api/directline/token", headers=ok)
        assert response.status == 204
        assert response.headers["Access-Control-Allow-Origin"] == "https://intranet.example"
        response = await h.client.options("/v3/directline/conversations", headers=ok)
        assert response.status == 204 and "Authorization" in response.headers["Access-Control-Allow-Headers"]
        response = await h.client.post(
            "/api/directline/token", headers={"Origin": "https://intranet.example"}
        )
        assert response.headers["Access-Control-Allow-Origin"] == "https://intranet.example"

        evil = {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
        assert (await h.client.options("/api/directline/token", headers=evil)).status == 403
        response = await h.client.post("/api/directline/token", headers={"Origin": "https://evil.example"})
        assert "Access-Control-Allow-Origin" not in response.headers


def test_access_log_filter_drops_polls_and_connector_paths() -> None:
    quiet = QuietWebChatAccess()

    def keeps(request_line: str, status: int = 200) -> bool:
        message = f'127.0.0.1 [29/Nov/2026:10:00:00 +0000] "{request_line}" {status} 10 "-" "Chrome"'
        return quiet.filter(logging.LogRecord("aiohttp.access", logging.INFO, "", 0, message, None, None))

    assert not keeps("GET /v3/directline/conversations/abc/activities?watermark=3 HTTP/1.1")
    assert keeps("GET /v3/directline/conversations/abc/activities?watermark=x HTTP/1.1", 400)
    assert not keeps("POST /webchat/connector/KEY/v3/conversations/abc/activities HTTP/1.1")
    assert keeps("POST /v3/directline/conversations/abc/activities HTTP/1.1")
    assert keeps("GET /chat HTTP/1.1")
