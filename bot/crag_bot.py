"""The ActivityHandler: welcome, card submits, invokes, and messages handed to the turn (dialogs/)."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable

from botbuilder.core import (
    ActivityHandler,
    CardFactory,
    ConversationState,
    InvokeResponse,
    MessageFactory,
    TurnContext,
    UserState,
)
from botbuilder.schema import Activity, ActivityTypes, ChannelAccount, ResourceResponse

from bot.bot_runtime import BotRuntime
from bot.card_actions import followup_question, handle_submit, is_card_submit
from bot.invokes import on_invoke
from cards.welcome_card import welcome_card
from dialogs.answer import handle_message
from hosting.examples import example_questions
from hosting.logsafe import esc
from hosting.ui_texts import language_of, t

log = logging.getLogger(__name__)

# turn_state key: True once a message (not a typing indicator) went out in this turn.
REPLIED = "crag.replied"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class CragBot(ActivityHandler):  # type: ignore[misc]  # botbuilder has no type information (Any)
    def __init__(
        self,
        runtime: BotRuntime,
        conversation_state: ConversationState,
        user_state: UserState,
    ) -> None:
        self.runtime = runtime
        self.conversation_state = conversation_state
        self.user_state = user_state
        # The recent turns of the conversation, for follow-up questions.
        self.history = conversation_state.create_property("CragHistory")

    async def on_turn(self, turn_context: TurnContext) -> None:
        turn_context.on_send_activities(_note_reply)
        activity = turn_context.activity
        if isinstance(activity.text, str):
            # JSON may carry a lone surrogate ("\\ud800"), which no reply, log or database can encode.
            activity.text = _LONE_SURROGATE.sub("\ufffd", activity.text)
        await super().on_turn(turn_context)
        await self.conversation_state.save_changes(turn_context)
        await self.user_state.save_changes(turn_context)

    async def on_members_added_activity(
        self, members_added: list[ChannelAccount], turn_context: TurnContext
    ) -> None:
        activity = turn_context.activity
        bot_id = activity.recipient.id if activity.recipient else None
        lang = language_of(activity.locale)
        name = self.runtime.settings.bot_name
        kind = activity.conversation.conversation_type if activity.conversation else None
        if kind in ("channel", "groupChat"):
            # In a team or group chat, one short introduction when the bot itself is added.
            if any(m.id == bot_id for m in members_added):
                await turn_context.send_activity(MessageFactory.text(t("intro", lang, name=name)))
            return
        # Teams announces a personal install with the bot alone in membersAdded (the user is not
        # "added" to their own chat); other clients add the user. Either way, one welcome.
        personal_install = kind == "personal" and any(m.id == bot_id for m in members_added)
        if personal_install or any(m.id != bot_id for m in members_added):
            settings = self.runtime.settings
            examples = example_questions(lang, settings.docs_dir, settings.welcome_examples)
            card = CardFactory.adaptive_card(welcome_card(name, lang, examples))
            await turn_context.send_activity(MessageFactory.attachment(card))

    async def on_message_activity(self, turn_context: TurnContext) -> None:
        activity = turn_context.activity
        if is_card_submit(activity.value, activity.text):
            question = followup_question(activity.value)
            if question is None:
                await handle_submit(turn_context, self.runtime, language_of(activity.locale))
                return
            # A follow-up suggestion button: ask it as if the user had typed it.
            activity.text, activity.value = _LONE_SURROGATE.sub("\ufffd", question), None
        kind = activity.conversation.conversation_type if activity.conversation else None
        if kind in ("channel", "groupChat") and not _mentions_bot(activity):
            # Only messages addressed to the bot are for it (Teams delivers these, other clients may not).
            log.info("ignored a %s message that does not mention the bot", esc(kind))
            return
        # In channels the text starts with "<at>Bot</at>"; the question is what follows.
        activity.text = _without_bot_mention(activity).strip()
        await handle_message(turn_context, self.runtime, self.history)

    async def on_invoke_activity(self, turn_context: TurnContext) -> InvokeResponse:
        # Replaces the SDK's handler: its invoke responses carry dict bodies, which 4.17 cannot send.
        return await on_invoke(turn_context, self.runtime)

    async def on_unrecognized_activity_type(self, turn_context: TurnContext) -> None:
        log.info("ignored activity of type %s", esc(turn_context.activity.type))


async def on_turn_error(context: TurnContext, error: Exception) -> None:
    """The adapter's handler of an exception a turn raised: the details go to the log, the user gets a
    polite sentence, never a stack trace."""
    activity = context.activity
    log.error("unhandled error in turn %s of %s", esc(activity.id), esc(activity.channel_id), exc_info=error)
    # Every message gets an answer: a typing indicator or a stream's progress alone is none.
    if activity.type == ActivityTypes.message and not context.turn_state.get(REPLIED):
        try:
            await context.send_activity(t("error", language_of(context.activity.locale)))
        except Exception:
            log.exception("could not send the error message")


async def _note_reply(
    context: TurnContext,
    activities: list[Activity],
    send: Callable[[], Awaitable[list[ResourceResponse]]],
) -> list[ResourceResponse]:
    responses = await send()
    if any(a.type == ActivityTypes.message for a in activities):
        context.turn_state[REPLIED] = True
    return responses


def _without_bot_mention(activity: Activity) -> str:
    """The text without the "<at>Bot</at>" of mentions of the bot. The SDK's remove_recipient_mention
    raises on a mention entity without `mentioned` and reads the mention's text as a regex."""
    text = activity.text or ""
    bot_id = activity.recipient.id if activity.recipient else None
    for entity in activity.entities or []:
        props = entity.additional_properties or {}
        mentioned, mention_text = props.get("mentioned"), props.get("text")
        if (
            (entity.type or "").lower() == "mention"
            and isinstance(mentioned, dict)
            and mentioned.get("id") == bot_id
            and isinstance(mention_text, str)
            and mention_text
        ):
            text = text.replace(mention_text, "")
    return text


def _mentions_bot(activity: Activity) -> bool:
    bot_id = activity.recipient.id if activity.recipient else None
    for entity in activity.entities or []:
        props = entity.additional_properties or {}
        mentioned = props.get("mentioned") or {}
        if entity.type == "mention" and isinstance(mentioned, dict) and mentioned.get("id") == bot_id:
            return True
    return False
