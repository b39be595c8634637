"""The ActivityHandler: welcome, card submits, and messages handed to the main dialog."""

from __future__ import annotations

import logging

from botbuilder.core import ActivityHandler, ConversationState, MessageFactory, TurnContext, UserState
from botbuilder.dialogs import Dialog, DialogExtensions
from botbuilder.schema import ChannelAccount

from bot.card_actions import followup_question, handle_submit, is_card_submit
from bot.runtime import BotRuntime
from cards.strings import language_of, t

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
        bot_id = turn_context.activity.recipient.id if turn_context.activity.recipient else None
        lang = language_of(turn_context.activity.locale)
        for member in members_added:
            if member.id != bot_id:
                name = self.runtime.settings.bot_name
                await turn_context.send_activity(MessageFactory.text(t("welcome", lang, name=name)))

    async def on_message_activity(self, turn_context: TurnContext) -> None:
        activity = turn_context.activity
        if is_card_submit(activity.value, activity.text):
            question = followup_question(activity.value)
            if question is None:
                await handle_submit(turn_context, self.runtime, language_of(activity.locale))
                return
            # A follow-up suggestion button: ask it as if the user had typed it.
            activity.text, activity.value = question, None
        # In channels the text starts with "<at>Bot</at>"; the question is what follows.
        activity.text = (TurnContext.remove_recipient_mention(activity) or "").strip()
        await DialogExtensions.run_dialog(
            self.dialog, turn_context, self.conversation_state.create_property("DialogState")
        )

    async def on_unrecognized_activity_type(self, turn_context: TurnContext) -> None:
        log.info("ignored activity of type %r", turn_context.activity.type)
