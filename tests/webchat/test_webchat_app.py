"""The real bot (`python app.py`) behind its local Direct Line, over HTTP as Web Chat talks to it:
the answer card for a sample-document question, and a 👍 click stored in the feedback database."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from tests.fakes.bot_connector import card_of, find_by_id
from tests.paths import SAMPLE_DOCS
from tests.servers.app_process import AppProcess

QUESTION = "有給休暇の繰越しは最大何日までできますか？"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppProcess]:
    proc = AppProcess(tmp_path_factory.mktemp("webchat-app"), SAMPLE_DOCS)
    proc.start()
    yield proc
    proc.stop()


class DirectLineUser:
    """Web Chat's side of the local Direct Line, without the browser."""

    def __init__(self, session: aiohttp.ClientSession, app: AppProcess) -> None:
        self.http = session
        self.app = app
        self.seen: list[dict[str, Any]] = []
        self.watermark = ""
        self.headers: dict[str, str] = {}
        self.base = ""

    async def start(self) -> None:
        async with self.http.post(self.app.url + "/api/directline/token") as r:
            token = await r.json()
        self.user_id = token["userId"]
        self.base = f"{token['domain']}/conversations"
        async with self.http.post(
            self.base, headers={"Authorization": f"Bearer {token['token']}", "Accept-Language": "ja-JP"}
        ) as r:
            assert r.status == 201
            started = await r.json()
        self.headers = {"Authorization": f"Bearer {started['token']}"}
        self.base += "/" + started["conversationId"]

    async def send(self, **activity: Any) -> str:
        body = {"type": "message", "from": {"id": self.user_id}, "locale": "ja-JP", **activity}
        async with self.http.post(f"{self.base}/activities", json=body, headers=self.headers) as r:
            assert r.status == 200, await r.text()
            activity_id: str = (await r.json())["id"]
            return activity_id

    async def wait_for(self, predicate: Any, timeout: float = 20.0) -> dict[str, Any]:
        """Poll until an activity (seen now or before) matches `predicate`."""
        for activity in self.seen:
            if predicate(activity):
                return activity
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            async with self.http.get(
                f"{self.base}/activities", params={"watermark": self.watermark}, headers=self.headers
            ) as r:
                body = await r.json()
            self.watermark = body["watermark"]
            self.seen.extend(body["activities"])
            for activity in body["activities"]:
                if predicate(activity):
                    return activity  # type: ignore[no-any-return]
            await asyncio.sleep(0.2)
        raise AssertionError(f"nothing matched in {self.seen}")


async def test_answer_card_and_thumbs_up_through_local_directline(app: AppProcess) -> None:
    async with aiohttp.ClientSession() as http:
        user = DirectLineUser(http, app)
        await user.start()
        question_id = await user.send(text=QUESTION, channelData={"clientActivityID": "q-1"})
        echo = await user.wait_for(lambda a: a.get("id") == question_id)
        assert echo["channelData"]["clientActivityID"] == "q-1" and echo["text"] == QUESTION

        reply = await user.wait_for(lambda a: bool(card_of(a)) and find_by_id(card_of(a) or {}, "answer"))
        card = card_of(reply)
        assert card is not None
        assert "20日" in (find_by_id(card, "answer") or {})["text"]
        assert "leave_policy.md" in (find_by_id(card, "cited_files") or {})["text"]
        assert "社内文書" in (find_by_id(card, "branch") or {})["text"]

        up = next(a for a in card["actions"] if a["data"].get("reaction") == "up")
        await user.send(value=up["data"], channelData={"clientActivityID": "q-2", "postBack": True})
        ack = await user.wait_for(lambda a: a.get("type") == "message" and "👍" in (a.get("text") or ""))
        assert ack["from"]["role"] == "bot"

    # The access log keeps the connector key (in the bot's reply paths) and the polls out.
    log = app.log()
    assert "/webchat/connector/" not in log and "/activities?watermark=" not in log
    assert "POST /v3/directline/conversations/" in log

    with sqlite3.connect(app.feedback_db) as conn:
        rows = conn.execute(
            "SELECT reaction, channel_id, user_id, question FROM answer_feedback WHERE user_id = ?",
            (user.user_id,),
        ).fetchall()
    assert rows == [("up", "webchat", user.user_id, QUESTION)]


async def test_a_rating_of_an_older_answer_lands_on_it_and_a_foreign_one_is_kept_apart(
    app: AppProcess,
) -> None:
    """Two answers, the older one rated: its card's result id names it (a fallback to the latest
    answer would show). A card copied from another Web Chat conversation names an answer not given
    here: kept as an unattributed rating, the user told so, no answer of this conversation rated."""
    questions = ("リモートワーク手当は月額いくらですか？", "来客用のWi-Fiコードはどうやって取得しますか？")
    async with aiohttp.ClientSession() as http:
        other = DirectLineUser(http, app)
        await other.start()
        await other.send(text=questions[0])
        foreign = _thumb(card_of(await other.wait_for(lambda a: bool(_thumb(card_of(a))))), "down")
        user = DirectLineUser(http, app)
        await user.start()
        ups: list[dict[str, str]] = []
        for question in questions:
            await user.send(text=question)
            reply = await user.wait_for(lambda a: _thumb(card_of(a)) not in (None, *ups))
            ups.append(_thumb(card_of(reply)))
        await user.send(value=ups[0])
        await user.wait_for(lambda a: "👍" in (a.get("text") or ""))
        await user.send(value=foreign)
        await user.wait_for(lambda a: "評価は記録しましたが" in (a.get("text") or ""))

    with sqlite3.connect(app.feedback_db) as conn:
        answers = dict(
            conn.execute("SELECT question, result_id FROM answers WHERE user_id = ?", (user.user_id,))
        )
        rated = conn.execute(
            "SELECT result_id, reaction FROM answer_feedback WHERE user_id = ?", (user.user_id,)
        ).fetchall()
        apart = conn.execute(
            "SELECT named_id, reaction, source, channel_id FROM unattributed_feedback WHERE user_id = ?",
            (user.user_id,),
        ).fetchall()
    assert len(answers) == 2 and rated == [(answers[questions[0]], "up")]
    assert apart == [(foreign["result_id"], "down", "card", "webchat")]


def _thumb(card: dict[str, Any] | None, reaction: str = "up") -> Any:
    """The data of a card's 👍 (or 👎) button; None for a card without them."""
    actions = (card or {}).get("actions") or []
    return next((a["data"] for a in actions if a.get("data", {}).get("reaction") == reaction), None)
