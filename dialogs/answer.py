"""One message, handled: the only code that calls the engine.

    message -> command or question -> engine.run -> reply (cards/) -> store the answer -> send
    -> remember the turn for follow-ups

The bot (bot/crag_bot.py) hands every message here; the engine sees the question and the history,
never an activity. What the turn needs from the app is the small `TurnDeps` below.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any, Protocol

from botbuilder.core import MessageFactory, StatePropertyAccessor, TurnContext
from botbuilder.schema import Activity, ActivityTypes

from cards.teams_message import answer_reply
from crag.core.models import CragResult, Turn
from crag.core.protocols import TurnStopped
from crag.runtime.handle import EngineHandle
from crag.text.lang import detect_language
from dialogs.commands import Command, classify, command_text
from dialogs.streaming import TeamsStreamer, can_stream
from feedback.protocol import Feedback, MessageIdKind
from hosting.app_settings import BotSettings
from hosting.asker import Asker
from hosting.logsafe import esc
from hosting.ui_texts import Lang, language_of, t

log = logging.getLogger(__name__)


class LinkSigner(Protocol):
    def sign_result(self, result: CragResult, user: str = "") -> CragResult: ...


class AskerSource(Protocol):
    async def asker(self, activity: Activity) -> Asker: ...


class TurnDeps(Protocol):
    """What a turn uses of the app (bot/bot_runtime.py's BotRuntime)."""

    settings: BotSettings
    handle: EngineHandle  # the engine, once its index is open
    feedback: Feedback

    # Read-only (properties), so that BotRuntime's DocLinks and Askers attributes conform.
    @property
    def links(self) -> LinkSigner: ...

    @property
    def askers(self) -> AskerSource: ...  # who asks: the reader answers are trimmed to (hosting/asker.py)


def user_language(context: TurnContext, text: str = "") -> Lang:
    if text and detect_language(text) == "ja":
        return "ja"
    return language_of(context.activity.locale)


async def handle_message(context: TurnContext, deps: TurnDeps, history: StatePropertyAccessor) -> None:
    text = (context.activity.text or "").strip()
    lang = user_language(context, text)
    settings = deps.settings
    command = classify(text, settings.max_question_chars)
    if command is Command.QUESTION and deps.handle.engine is None:
        await context.send_activity(MessageFactory.text(t("not_ready", lang)))
        return
    if command is Command.QUESTION:
        await answer(context, deps, history, text)
        return
    if command is Command.RESET:
        await history.set(context, [])
    if command in (Command.EMPTY, Command.TOO_LONG):
        conversation = esc(context.activity.conversation.id)
        log.info("%s message (%d chars) in %s", command.value, len(text), conversation)
    reply = command_text(command, lang, settings.bot_name, len(text), settings.max_question_chars)
    await context.send_activity(MessageFactory.text(reply))


def turn_attributes(activity: Activity) -> dict[str, str]:
    """What the trace of a turn says about where it came from: the channel and the kind of
    conversation (no ids, no names)."""
    conversation = activity.conversation
    return {
        "crag.channel": activity.channel_id or "",
        "crag.conversation_type": (conversation.conversation_type if conversation else None) or "",
    }


async def answer(context: TurnContext, deps: TurnDeps, history: StatePropertyAccessor, question: str) -> None:
    engine = deps.handle.engine
    assert engine is not None  # handle_message checked
    settings = deps.settings
    activity = context.activity
    streamer = None
    if settings.streaming and can_stream(context):
        streamer = TeamsStreamer(context, detect_language(question), settings.stream_interval)
    else:
        await context.send_activity(Activity(type=ActivityTypes.typing))
    stored: list[dict[str, Any]] = await history.get(context, list) or []
    asker = await deps.askers.asker(activity)
    try:
        result = await engine.run(
            question,
            [Turn.model_validate(h) for h in stored],
            on_stage=streamer.on_stage if streamer else None,
            on_text=streamer.on_text if streamer else None,
            reader=asker.reader,
            attributes=turn_attributes(activity),
        )
    except TurnStopped:
        # Stopped in Teams: nothing more is sent, and the question is not remembered for follow-ups
        # (the user saw no answer to it).
        await _record(deps.feedback.record_stopped(question, detect_language(question), *_who(activity)))
        return
    log.info(
        "answered branch=%s kept=%d cited=%s queries=%d total_ms=%.1f llm_calls=%d llm_tokens=%d notices=%s",
        result.branch.value,
        len(result.kept),
        result.cited_files,
        len(result.queries),
        result.timings_ms.get("total", 0.0),
        result.llm_calls,
        result.llm_tokens,
        result.notices,
    )
    # Links to documents served by the bot are signed per card when it is on the internet.
    # With access trimming they name the asker, so that /docs/ serves them only while they may read.
    result = deps.links.sign_result(result, asker.link_user)
    reply = answer_reply(result, activity.channel_id or "", show_scores=settings.card_scores)
    # Recorded before it is sent: a rating can come as soon as the card shows. When the database
    # fails, the answer still goes out; ratings of it will be kept unattributed.
    who = _who(activity)
    await _record(deps.feedback.record_answer(result, *who, reply.card), result.id)
    # A streamed answer's final message takes the stream's place in the chat: Teams' feedback on it
    # may name the stream id. Recorded before the final goes out, so that even a click that comes
    # before the sent id is recorded names a known answer.
    if streamer is not None and streamer.open and streamer.stream_id:
        await _record_message_id(deps.feedback, result.id, streamer.stream_id, "stream")
    try:
        if streamer:
            sent = await streamer.send_final(reply.activity)
        else:
            sent = await context.send_activity(reply.activity)
    except TurnStopped:
        await _record(deps.feedback.record_answer(result, *who, reply.card, stopped=True), result.id)
        return
    if sent is not None and sent.id:  # the stream id again (if so): its row is kept as it is
        await _record_message_id(deps.feedback, result.id, sent.id, "sent")
    turns = settings.history_turns
    remembered = (
        [*stored, Turn(question=question, answer=result.answer).model_dump()][-turns:] if turns else []
    )
    await history.set(context, remembered)


def _who(activity: Activity) -> tuple[str, str, str]:
    """The conversation, the user and the channel an answer is stored under."""
    user = activity.from_property.id if activity.from_property else ""
    return activity.conversation.id, user, activity.channel_id or ""


async def _record_message_id(
    feedback: Feedback, result_id: str, message_id: str, kind: MessageIdKind
) -> None:
    try:
        await feedback.set_message_id(result_id, message_id, kind)
    except Exception:  # the answer still counts; a rating naming this id will be kept unattributed
        log.exception("could not record the %s id of answer %s", kind, result_id)


async def _record(write: Awaitable[None], result_id: str = "") -> None:
    try:
        await write
    except Exception:
        log.exception("could not record answer %s", result_id or "(stopped turn)")
