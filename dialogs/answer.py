"""One message, handled: the only code that calls the engine.

    message -> command or question -> engine.run -> reply (cards/) -> store the answer -> send
    -> remember the turn for follow-ups

The bot (bot/crag_bot.py) hands every message here; the engine sees the question and the history,
never an activity. What the turn needs from the app is the small `TurnDeps` below.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from botbuilder.core import MessageFactory, StatePropertyAccessor, TurnContext
from botbuilder.schema import Activity, ActivityTypes

from cards.teams_message import answer_reply
from crag.core.models import CragResult, Turn
from crag.runtime.handle import EngineHandle
from crag.text.lang import detect_language
from dialogs.commands import Command, classify, command_text
from dialogs.streaming import TeamsStreamer, can_stream
from service.asker import Asker
from service.feedback.protocol import Feedback
from service.logsafe import esc
from service.settings import BotSettings
from service.texts import Lang, language_of, t

log = logging.getLogger(__name__)


class LinkSigner(Protocol):
    def sign_result(self, result: CragResult, user: str = "") -> CragResult: ...


class AskerSource(Protocol):
    async def asker(self, activity: Activity) -> Asker: ...


class TurnDeps(Protocol):
    """What a turn uses of the app (service/runtime.py's BotRuntime)."""

    settings: BotSettings
    handle: EngineHandle  # the engine, once its index is open
    feedback: Feedback

    # Read-only (properties), so that BotRuntime's DocLinks and Askers attributes conform.
    @property
    def links(self) -> LinkSigner: ...

    @property
    def askers(self) -> AskerSource: ...  # who asks: the reader answers are trimmed to (service/asker.py)


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
    result = await engine.run(
        question,
        [Turn.model_validate(h) for h in stored],
        on_stage=streamer.on_stage if streamer else None,
        on_text=streamer.on_text if streamer else None,
        reader=asker.reader,
        attributes=turn_attributes(activity),
    )
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
    try:
        await deps.feedback.record_answer(
            result,
            activity.conversation.id,
            activity.from_property.id if activity.from_property else "",
            activity.channel_id or "",
            reply.card,
        )
    except Exception:
        # The answer still goes out; only ratings of it will be refused as unknown.
        log.exception("could not record answer %s", result.id)
    sent = await context.send_activity(streamer.finish(reply.activity) if streamer else reply.activity)
    if sent is not None and sent.id:
        try:
            await deps.feedback.set_message_id(result.id, sent.id)
        except Exception:
            log.exception("could not record the message id of answer %s", result.id)
    turns = settings.history_turns
    remembered = (
        [*stored, Turn(question=question, answer=result.answer).model_dump()][-turns:] if turns else []
    )
    await history.set(context, remembered)
