"""A whole bot turn in-process (botbuilder's TestAdapter): the ActivityHandler, the turn, the engine,
the reply and the stored answer, without starting `python app.py`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from botbuilder.core import ConversationState, MemoryStorage, UserState
from botbuilder.core.adapters import TestAdapter
from botbuilder.schema import Activity, ActivityTypes

from bot.bot_runtime import BotRuntime
from bot.crag_bot import CragBot
from hosting.app_settings import BotSettings
from tests.fakes.bot_connector import card_text

DOCS = {
    "leave.md": """# 休暇規程

## 年次有給休暇の繰越し

未使用の年次有給休暇は翌年度に限り最大20日まで繰り越すことができる。繰越分は2年で消滅する。
""",
    "parking.md": """# Parking

## Bicycles

Bicycle parking is in the basement, level B1. Register your bicycle with General Affairs.
""",
}


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[tuple[CragBot, BotRuntime]]:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, "utf-8")
    settings = BotSettings(
        CRAG_DOCS_DIR=str(docs),
        CRAG_INDEX_DIR=str(tmp_path / "index"),
        CRAG_FEEDBACK_DB=str(tmp_path / "feedback.sqlite3"),
        CRAG_EMBEDDINGS="off",
        CRAG_STATE_STORAGE="memory",
    )
    runtime = BotRuntime(settings)
    await runtime.start()
    await runtime.load_index()
    storage = MemoryStorage()
    yield CragBot(runtime, ConversationState(storage), UserState(storage)), runtime
    await runtime.close()


async def say(adapter: TestAdapter, text: str) -> list[Activity]:
    """The message activities the bot sent back for one user message (typing indicators dropped)."""
    await adapter.receive_activity(Activity(type=ActivityTypes.message, text=text, locale="ja-JP"))
    out = []
    while (activity := adapter.get_next_activity()) is not None:
        if activity.type == ActivityTypes.message:
            out.append(activity)
    return out


def card_of(activity: Activity) -> dict[str, Any]:
    assert activity.attachments, activity
    content: dict[str, Any] = activity.attachments[0].content
    return content


def texts(card: dict[str, Any]) -> str:
    return card_text(card)  # every text, those behind the "Show sources" toggle included


async def test_a_question_gets_a_card_citing_its_file_and_the_answer_is_stored(
    bot: tuple[CragBot, BotRuntime],
) -> None:
    handler, runtime = bot
    adapter = TestAdapter(handler.on_turn)
    [reply] = await say(adapter, "有給休暇は翌年度に何日まで繰り越せますか？")
    card = card_of(reply)
    assert "20日" in texts(card) and "leave.md" in texts(card)
    # The stored card is the one sent, built once (not pulled back out of the activity).
    assert await runtime.feedback.stored_card(_result_id(card)) == card


async def test_commands_and_history_in_one_conversation(bot: tuple[CragBot, BotRuntime]) -> None:
    handler, _ = bot
    adapter = TestAdapter(handler.on_turn)
    [help_reply] = await say(adapter, "help")
    assert help_reply.text and not help_reply.attachments
    await say(adapter, "有給休暇の繰越しは何日まで？")
    # A follow-up that leans on the previous question searches with its keywords.
    [followup] = await say(adapter, "その繰越分はいつ消滅しますか？")
    assert "有給" in texts(card_of(followup)) and "2年" in texts(card_of(followup))
    [reset] = await say(adapter, "reset")
    assert reset.text and not reset.attachments
    # After reset the same follow-up has no previous question to lean on.
    [alone] = await say(adapter, "その繰越分はいつ消滅しますか？")
    assert texts(card_of(alone)) != texts(card_of(followup))


async def test_empty_and_too_long_messages_get_a_clear_reply_and_no_engine_call(
    bot: tuple[CragBot, BotRuntime],
) -> None:
    handler, runtime = bot
    adapter = TestAdapter(handler.on_turn)
    [empty] = await say(adapter, "   ")
    [long] = await say(adapter, "あ" * (runtime.settings.max_question_chars + 1))
    assert empty.text and long.text and f"{runtime.settings.max_question_chars:,}" in long.text
    assert runtime.handle.engine is not None and runtime.handle.engine.cache is not None
    assert runtime.handle.engine.cache.stats.misses == 0  # the engine never looked the message up


def _result_id(card: dict[str, Any]) -> str:
    """The answer's id, as the card's rating buttons carry it."""
    for action in card.get("actions", []):
        data = action.get("data") or {}
        if isinstance(data, dict) and data.get("result_id"):
            return str(data["result_id"])
        verb_data = (action.get("fallback") or {}).get("data") or {}
        if isinstance(verb_data, dict) and verb_data.get("result_id"):
            return str(verb_data["result_id"])
    raise AssertionError(f"no result id in {card.get('actions')}")
