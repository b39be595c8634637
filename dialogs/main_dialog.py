"""The main dialog: handles one user message per turn and keeps the recent history for follow-ups."""

from __future__ import annotations

import logging
from typing import Any

from botbuilder.core import ConversationState, MessageFactory, StatePropertyAccessor, TurnContext
from botbuilder.dialogs import ComponentDialog, DialogTurnResult, WaterfallDialog, WaterfallStepContext
from botbuilder.schema import Activity, ActivityTypes

from bot.runtime import BotRuntime
from bot.streaming import TeamsStreamer, can_stream
from bot.teams_message import answer_activity
from cards.strings import Lang, language_of, t
from crag.logsafe import esc
from crag.models import Turn
from crag.text.lang import detect_language

log = logging.getLogger(__name__)

HELP_COMMANDS = {"help", "/help", "?", "ヘルプ", "使い方"}
RESET_COMMANDS = {"reset", "/reset", "リセット"}
GREETINGS = {
    "hi",
    "hello",
    "hey",
    "こんにちは",
    "こんばんは",
    "おはよう",
    "おはようございます",
    "はじめまして",
}


def user_language(context: TurnContext, text: str = "") -> Lang:
    if text and detect_language(text) == "ja":
        return "ja"
    return language_of(context.activity.locale)


class MainDialog(ComponentDialog):
    def __init__(self, runtime: BotRuntime, conversation_state: ConversationState) -> None:
        super().__init__(MainDialog.__name__)
        self.runtime = runtime
        self.history: StatePropertyAccessor = conversation_state.create_property("CragHistory")
        self.add_dialog(WaterfallDialog("turn", [self.answer_step]))
        self.initial_dialog_id = "turn"

    async def answer_step(self, step: WaterfallStepContext) -> DialogTurnResult:
        context = step.context
        text = (context.activity.text or "").strip()
        lang = user_language(context, text)
        command = text.lower()
        name = self.runtime.settings.bot_name
        if command in HELP_COMMANDS:
            await context.send_activity(MessageFactory.text(t("help", lang, name=name)))
        elif command.rstrip("!！。.") in GREETINGS:
            await context.send_activity(MessageFactory.text(t("welcome", lang, name=name)))
        elif command in RESET_COMMANDS:
            await self.history.set(context, [])
            await context.send_activity(MessageFactory.text(t("reset", lang)))
        elif not text:
            log.info("empty message in %s", esc(context.activity.conversation.id))
            await context.send_activity(MessageFactory.text(t("empty", lang)))
        elif len(text) > self.runtime.settings.max_question_chars:
            log.info("message too long (%d chars) in %s", len(text), esc(context.activity.conversation.id))
            limit = self.runtime.settings.max_question_chars
            await context.send_activity(
                MessageFactory.text(t("too_long", lang, length=len(text), limit=limit))
            )
        elif self.runtime.engine is None:
            await context.send_activity(MessageFactory.text(t("not_ready", lang)))
        else:
            await self._answer(context, text)
        return await step.end_dialog()

    async def _answer(self, context: TurnContext, question: str) -> None:
        assert self.runtime.engine is not None
        settings = self.runtime.settings
        streamer = None
        if settings.streaming and can_stream(context):
            streamer = TeamsStreamer(context, detect_language(question), settings.stream_interval)
        else:
            await context.send_activity(Activity(type=ActivityTypes.typing))
        stored: list[dict[str, Any]] = await self.history.get(context, list) or []
        history = [Turn.model_validate(h) for h in stored]
        result = await self.runtime.engine.run(
            question,
            history,
            on_stage=streamer.on_stage if streamer else None,
            on_text=streamer.on_text if streamer else None,
        )
        activity = context.activity
        log.info(
            "answered branch=%s kept=%d cited=%s total_ms=%.1f llm_calls=%d llm_tokens=%d notices=%s",
            result.branch.value,
            len(result.kept),
            result.cited_files,
            result.timings_ms.get("total", 0.0),
            result.llm_calls,
            result.llm_tokens,
            result.notices,
        )
        # Links to documents served by the bot are signed per card when it is on the internet.
        result = self.runtime.links.sign_result(result)
        reply = answer_activity(result, activity.channel_id or "")
        card = reply.attachments[0].content if reply.attachments else None
        feedback = self.runtime.feedback
        try:
            await feedback.record_answer(
                result,
                activity.conversation.id,
                activity.from_property.id if activity.from_property else "",
                activity.channel_id or "",
                card,
            )
        except Exception:
            # The answer still goes out; only ratings of it will be refused as unknown.
            log.exception("could not record answer %s", result.id)
        sent = await context.send_activity(streamer.finish(reply) if streamer else reply)
        if sent is not None and sent.id:
            try:
                await feedback.set_message_id(result.id, sent.id)
            except Exception:
                log.exception("could not record the message id of answer %s", result.id)
        turns = self.runtime.settings.history_turns
        stored = (
            [*stored, Turn(question=question, answer=result.answer).model_dump()][-turns:] if turns else []
        )
        await self.history.set(context, stored)
