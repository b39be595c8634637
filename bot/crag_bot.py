"""The ActivityHandler: welcome, card submits, and messages handed to the main dialog."""

from __future__ import annotations

import logging

from botbuilder.core import (
    ActivityHandler,
    CardFactory,
    ConversationState,
    InvokeResponse,
    MessageFactory,
    TurnContext,
    UserState,
)
from botbuilder.dialogs import Dialog, DialogExtensions
from botbuilder.schema import Activity, ChannelAccount

from bot.card_actions import followup_question, handle_submit, is_card_submit
from bot.invokes import on_invoke
from bot.runtime import BotRuntime
from cards.strings import language_of, t
from cards.welcome_card import welcome_card

log = logging.getLogger(__name__)


class CragBot(ActivityHandler):
    def __init__(
        self,
        runtime: BotRuntime,
        conversation_state: ConversationState,
        user_state: UserState,
        dialog: Dialog,
    ) -> None:
        self.runtime = runtime
        self.conversation_state = conversation_state
        self.user_state = user_state
        self.dialog = dialog

    async def on_turn(self, turn_context: TurnContext) -> None:
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
        if any(m.id != bot_id for m in members_added):
            examples = [q.strip() for q in self.runtime.settings.welcome_examples.split("|") if q.strip()]
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
            activity.text, activity.value = question, None
        kind = activity.conversation.conversation_type if activity.conversation else None
        if kind in ("channel", "groupChat") and not _mentions_bot(activity):
            # Only messages addressed to the bot are for it (Teams delivers these, other clients may not).
            log.info("ignored a %s message that does not mention the bot", kind)
            return
        # In channels the text starts with "<at>Bot</at>"; the question is what follows.
        activity.text = (TurnContext.remove_recipient_mention(activity) or "").strip()
        await DialogExtensions.run_dialog(
            self.dialog, turn_context, self.conversation_state.create_property("DialogState")
        )

    async def on_invoke_activity(self, turn_context: TurnContext) -> InvokeResponse:
        # Replaces the SDK's handler: its invoke responses carry dict bodies, which 4.17 cannot send.
        return await on_invoke(turn_context, self.runtime)

    async def on_unrecognized_activity_type(self, turn_context: TurnContext) -> None:
        log.info("ignored activity of type %r", turn_context.activity.type)


def _mentions_bot(activity: Activity) -> bool:
    bot_id = activity.recipient.id if activity.recipient else None
    for entity in activity.entities or []:
        props = entity.additional_properties or {}
        mentioned = props.get("mentioned") or {}
        if entity.type == "mention" and isinstance(mentioned, dict) and mentioned.get("id") == bot_id:
            return True
    return False
