"""Replies posted over aiohttp (bot/channel/connector_http.py) are the SDK's: the same JSON, path and headers
for the bot's own replies, the same exceptions, and the SDK's retries."""

from __future__ import annotations

import datetime
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from botbuilder.core import CardFactory, MessageFactory, TurnContext
from botbuilder.schema import (
    Activity,
    ActivityTypes,
    CardAction,
    ChannelAccount,
    ConversationAccount,
    DeliveryModes,
    Mention,
    TextFormatTypes,
)
from botframework.connector.aio import ConnectorClient
from botframework.connector.auth import MicrosoftAppCredentials
from botframework.connector.models import ErrorResponseException
from msrest.exceptions import ClientRequestError
from msrest.serialization import Deserializer

from bot.channel import connector_http
from bot.channel.connector_http import DirectConversations, NotPlain, activity_json
from cards.teams_message import answer_reply
from cards.welcome_card import welcome_card
from crag.core.models import Branch, Chunk, Citation, CragResult, GradedChunk, WebOutcome, WebStatus
from crag.eval.loopback import LoopbackServer
from dialogs.streaming import StreamInfoEntity
from tests.fakes.bot_connector import FakeConnector


class TokenCredentials(MicrosoftAppCredentials):  # type: ignore[misc]
    """An app's credentials whose token is known (MSAL is not asked)."""

    def get_access_token(self, force_refresh: bool = False) -> str:
        return "token-for-replies"


def _result() -> CragResult:
    chunk = Chunk(
        id="c1",
        file="年次有給休暇.md",
        title="年次有給休暇 取扱要領",
        headers=["年次有給休暇 取扱要領", "4. 繰越"],
        text="翌年度に繰り越せる日数の上限は20日です。",
        url="http://localhost:3978/docs/annual-leave.md",
    )
    return CragResult(
        question="有給の繰越は何日まで？",
        language="ja",
        branch=Branch.CORRECT,
        queries=["有給 繰越 上限"],
        graded=[GradedChunk(chunk=chunk, score=0.91, kept=True)],
        web=WebOutcome(status=WebStatus.NOT_NEEDED),
        answer="翌年度に繰り越せる日数の上限は20日です。 [1]",
        citations=[
            Citation(
                number=1, kind="document", title=chunk.title, url=chunk.url, file=chunk.file, excerpt="翌年度"
            )
        ],
    )


def _incoming(channel_id: str) -> Activity:
    return Activity(
        type=ActivityTypes.message,
        id="incoming-1",
        channel_id=channel_id,
        service_url="http://127.0.0.1/",
        from_property=ChannelAccount(id="user-1", name="ユーザー", aad_object_id="aad-1"),
        recipient=ChannelAccount(id="bot-1", name="CRAG Assistant"),
        conversation=ConversationAccount(
            id="a:1/conv;messageid=42", conversation_type="personal", tenant_id="t"
        ),
        locale="ja-JP",
    )


def _replies() -> list[Activity]:
    """What the bot sends, addressed the way the adapter addresses it."""
    user = ChannelAccount(id="user-1", name="ユーザー")
    plain = [
        answer_reply(_result(), "msteams").activity,
        answer_reply(_result(), "emulator").activity,
        MessageFactory.attachment(CardFactory.adaptive_card(welcome_card("CRAG", "ja", ["有給って何日？"]))),
        Activity(
            type=ActivityTypes.typing,
            text="検索しています…",
            entities=[StreamInfoEntity(stream_type="informative", stream_sequence=1)],
        ),
        MessageFactory.suggested_actions(
            [CardAction(type="imBack", title="はい", value="はい")],
            'Line\u2028two "quoted" ✓',
        ),
        Activity(
            type=ActivityTypes.message,
            text="<at>ユーザー</at> see this",
            text_format=TextFormatTypes.markdown,  # an enum in a str field
            delivery_mode=DeliveryModes.normal,
            entities=[Mention(mentioned=user, text="<at>ユーザー</at>", type="mention")],
            timestamp=datetime.datetime(2026, 12, 1, 9, 30, 5, 120000, tzinfo=datetime.UTC),
            local_timestamp=datetime.datetime(
                2026, 12, 1, 18, 30, 5, tzinfo=datetime.timezone(datetime.timedelta(hours=9))
            ),
            value={"action": "rate", "ids": [1, 2.5, None, True], "nested": {"k": "値"}},
            channel_data={"notification": {"alert": True}},
        ),
    ]
    out = []
    for i, activity in enumerate(plain):
        incoming = _incoming("msteams" if i % 2 == 0 else "emulator")
        out.append(
            TurnContext.apply_conversation_reference(
                activity, TurnContext.get_conversation_reference(incoming)
            )
        )
    return out


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


def _client(url: str, app_id: str = "11111111-2222-3333-4444-555555555555") -> ConnectorClient:
    credentials = TokenCredentials(app_id, "secret") if app_id else MicrosoftAppCredentials(None, None)
    return ConnectorClient(credentials, base_url=url + "/")


def _received(connector: FakeConnector, index: int) -> tuple[dict[str, Any], str, dict[str, str]]:
    body = dict(connector.activities[index])
    body.pop("id", None)  # the fake gives one when the bot sends none
    request = connector.requests[index]
    headers = {k.lower(): v for k, v in request["headers"].items()}
    kept = {
        k: headers.get(k, "") for k in ("authorization", "content-type", "x-ms-conversation-id", "accept")
    }
    return body, request["path"], kept


@pytest.mark.parametrize("app_id", ["11111111-2222-3333-4444-555555555555", ""])
async def test_the_bots_replies_arrive_as_the_sdk_sends_them(
    connector: FakeConnector, session: aiohttp.ClientSession, app_id: str
) -> None:
    client = _client(connector.url, app_id)
    sdk = client.conversations
    direct = DirectConversations(client, lambda: session)
    for n, activity in enumerate(_replies()):
        conversation = activity.conversation.id
        via_sdk = await sdk.reply_to_activity(conversation, activity.reply_to_id, activity)
        via_direct = await direct.reply_to_activity(conversation, activity.reply_to_id, activity)
        assert via_sdk.id == connector.activities[2 * n]["id"]
        assert via_direct.id == connector.activities[2 * n + 1]["id"]
        assert _received(connector, 2 * n + 1) == _received(connector, 2 * n), f"reply {n}"
    # The new conversation message and the update (Teams' stream and the card after a rating) too.
    activity = _replies()[1]
    await sdk.send_to_conversation(activity.conversation.id, activity)
    await direct.send_to_conversation(activity.conversation.id, activity)
    await sdk.update_activity(activity.conversation.id, "a-1", activity)
    await direct.update_activity(activity.conversation.id, "a-1", activity)
    last = len(connector.activities)
    assert _received(connector, last - 3) == _received(connector, last - 4)
    assert _received(connector, last - 1) == _received(connector, last - 2)
    assert connector.requests[-1]["method"] == "PUT"
    expected = "Bearer token-for-replies" if app_id else ""
    assert all(_received(connector, i)[2]["authorization"] == expected for i in range(last))


def test_the_json_is_msrests_and_what_it_cannot_render_goes_to_the_sdk() -> None:
    client = _client("http://127.0.0.1:9")
    for activity in _replies():
        assert activity_json(activity) == client._serialize.body(activity, "Activity")
    # A model field holding a dict: msrest would build the model from it first.
    with pytest.raises(NotPlain):
        activity_json(Activity(type="message", from_property={"id": "u"}))  # type: ignore[arg-type]


class FlakyConnector(LoopbackServer):
    """Answers each request with the next status of a script (then 200)."""

    def __init__(self, script: list[tuple[int, dict[str, str]]]) -> None:
        super().__init__()
        self.script = list(script)
        self.bodies: list[dict[str, Any]] = []

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v3/conversations/{c}/activities/{a}", self._post)

    async def _post(self, request: web.Request) -> web.Response:
        self.bodies.append(await request.json())
        if self.script:
            status, headers = self.script.pop(0)
            error = {"error": {"code": "BadArgument", "message": f"status {status}"}}
            return web.json_response(error, status=status, headers=headers)
        return web.json_response({"id": "delivered"})


@pytest.fixture
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connector_http, "INITIAL_DELAY", 0.01)


@pytest.mark.usefixtures("quick_backoff")
async def test_throttling_and_server_errors_are_retried(session: aiohttp.ClientSession) -> None:
    fake = FlakyConnector([(429, {"Retry-After": "0"}), (503, {}), (500, {})])
    await fake.start()
    try:
        direct = DirectConversations(_client(fake.url), lambda: session)
        activity = _replies()[0]
        response = await direct.reply_to_activity("c", "a", activity)
        assert response is not None and response.id == "delivered"
        assert len(fake.bodies) == 4 and all(b == fake.bodies[0] for b in fake.bodies)
    finally:
        await fake.stop()


@pytest.mark.usefixtures("quick_backoff")
async def test_botframework_417_gives_up_on_a_throttled_reply(session: aiohttp.ClientSession) -> None:
    """A defect bot/channel/connector_http.py works around, on the SDK's own reply path: msrest's retry
    policy does not retry a 429, the answer Teams gives a bot it throttles (with the Retry-After it
    asks the bot to wait), so the reply is lost."""
    fake = FlakyConnector([(429, {"Retry-After": "0"})] * 2)
    await fake.start()
    try:
        with pytest.raises(ErrorResponseException) as throttled:
            await _client(fake.url).conversations.reply_to_activity("c", "a", _replies()[0])
        assert throttled.value.response.status_code == 429 and len(fake.bodies) == 1
        direct = DirectConversations(_client(fake.url), lambda: session)
        response = await direct.reply_to_activity("c", "a", _replies()[0])
        assert response is not None and response.id == "delivered" and len(fake.bodies) == 3
    finally:
        await fake.stop()


def test_botframework_417_walks_each_reply_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cost bot/channel/connector_http.py saves: msrest's Serializer.body, which the SDK's reply
    path calls, first rebuilds the Activity through msrest's Deserializer (the card walked twice);
    activity_json walks it once, without msrest."""
    rebuilt: list[str] = []
    deserialize = Deserializer._deserialize

    def counted(self: Deserializer, target: Any, data: Any) -> Any:
        rebuilt.append(str(target))
        return deserialize(self, target, data)

    monkeypatch.setattr(Deserializer, "_deserialize", counted)
    activity = _replies()[0]
    _client("http://127.0.0.1:9")._serialize.body(activity, "Activity")
    assert "Activity" in rebuilt
    rebuilt.clear()
    activity_json(activity)
    assert rebuilt == []


@pytest.mark.usefixtures("quick_backoff")
async def test_a_refusal_raises_the_sdks_exception_with_its_error(session: aiohttp.ClientSession) -> None:
    fake = FlakyConnector([(400, {})] + [(502, {})] * 4)
    await fake.start()
    try:
        direct = DirectConversations(_client(fake.url), lambda: session)
        with pytest.raises(ErrorResponseException) as refused:
            await direct.reply_to_activity("c", "a", _replies()[0])
        assert len(fake.bodies) == 1  # a 400 is not retried
        assert refused.value.error.error.code == "BadArgument"
        assert refused.value.response.status_code == 400
        with pytest.raises(ErrorResponseException) as failing:
            await direct.reply_to_activity("c", "a", _replies()[0])
        assert len(fake.bodies) == 5  # the first try and 3 retries
        assert failing.value.response.status_code == 502
    finally:
        await fake.stop()


@pytest.mark.usefixtures("quick_backoff")
async def test_an_unreachable_connector_raises_the_sdks_request_error(session: aiohttp.ClientSession) -> None:
    fake = FlakyConnector([])
    url = await fake.start()
    await fake.stop()  # nothing listens there now
    direct = DirectConversations(_client(url), lambda: session)
    with pytest.raises(ClientRequestError):
        await direct.reply_to_activity("c", "a", _replies()[0])


def test_the_empty_body_some_channels_send_is_no_resource() -> None:
    assert connector_http._resource(b"") is None
    assert connector_http._resource(b"<html>OK</html>") is None  # delivered; no id to read
    assert connector_http._resource(json.dumps({"id": "x"}).encode()).id == "x"  # type: ignore[union-attr]


def test_an_expect_replies_body_is_written_as_the_sdk_writes_it() -> None:
    from botbuilder.core import serializer_helper
    from botbuilder.schema import ExpectedReplies

    from bot.channel.adapter import response_body

    body = ExpectedReplies(activities=_replies())
    assert response_body(body) == serializer_helper(body)
    assert response_body(None) is None
