"""Invoke activities: Teams' native feedback buttons, and Action.Execute on answer cards of earlier
releases.

No card the bot sends today carries Action.Execute (in Teams the thumbs are Teams' own, under the
message). Cards sent by releases before native feedback did, and they stay in users' chats: their
clicks still come here, are stored, and get the card back in its thanks state.

botbuilder 4.17 turns a dict invoke body into an HTTP 500, so every body here is an msrest Model
(an empty one for {}). Bad or tampered data gets a 400 or a 200 with an error card, never a 500.
"""

from __future__ import annotations

import json
import logging
from typing import Any, ClassVar

from botbuilder.core import InvokeResponse, TurnContext
from botbuilder.schema import AdaptiveCardInvokeResponse
from msrest.serialization import Model

from bot.bot_runtime import BotRuntime
from bot.card_actions import rate
from cards.answer_card import FEEDBACK_ACTION, error_card, thanks_card
from feedback.protocol import FeedbackOutcome, Reaction
from hosting.logsafe import esc
from hosting.ui_texts import Lang, language_of, t

log = logging.getLogger(__name__)


class EmptyInvokeBody(Model):
    """Serializes to {}: botbuilder 4.17 fails (HTTP 500) on a plain dict invoke body."""

    # msrest declares it on Model without ClassVar; RUF012 wants ClassVar on a mutable class attribute.
    _attribute_map: ClassVar[dict[str, Any]] = {}  # type: ignore[misc]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]  # msrest's Model.__init__ is unannotated


CARD_CONTENT_TYPE = "application/vnd.microsoft.card.adaptive"
ERROR_CONTENT_TYPE = "application/vnd.microsoft.error"
_REACTIONS = {"like": "up", "dislike": "down"}


async def on_invoke(context: TurnContext, runtime: BotRuntime) -> InvokeResponse:
    name = context.activity.name or ""
    if name == "message/submitAction":
        return await native_feedback(context, runtime)
    if name == "adaptiveCard/action":
        return await card_action(context, runtime)
    log.info("unhandled invoke %s", esc(name, 100))
    # Not a server failure: HTTP 200 with the invoke protocol's own error body (statusCode 501).
    error = {"code": "NotImplemented", "message": "this bot does not handle this invoke"}
    return InvokeResponse(
        status=200, body=AdaptiveCardInvokeResponse(status_code=501, type=ERROR_CONTENT_TYPE, value=error)
    )


async def native_feedback(context: TurnContext, runtime: BotRuntime) -> InvokeResponse:
    """Teams' thumbs under an AI message: {"actionName": "feedback", "actionValue": {"reaction":
    "like"|"dislike", "feedback": "{\\"feedbackText\\": ...}"}}, replyToId = the rated message.

    The rating goes on the answer whose message (or stream) id replyToId names, and on no other: an
    invoke naming no known message (the Agents Playground sends none) is kept as an unattributed
    rating, acknowledged the same way."""
    activity = context.activity
    value = activity.value if isinstance(activity.value, dict) else {}
    action = value.get("actionValue") if value.get("actionName") == "feedback" else None
    reaction = _REACTIONS.get(action.get("reaction", "")) if isinstance(action, dict) else None
    if not isinstance(action, dict) or reaction is None:
        log.warning("rejected native feedback: malformed value")
        return InvokeResponse(status=400, body=EmptyInvokeBody())
    comment = _feedback_text(action.get("feedback"))
    conversation = activity.conversation.id if activity.conversation else ""
    named = activity.reply_to_id or ""
    who = (
        conversation,
        activity.from_property.id if activity.from_property else "",
        activity.channel_id or "",
    )
    up_down: Reaction = "up" if reaction == "up" else "down"
    feedback = runtime.feedback
    try:
        result_id = await feedback.answer_for_message(conversation, named)
        if result_id is not None:
            receipt = await feedback.record_feedback(
                result_id, up_down, *who, source="teams", comment=comment
            )
            if receipt.outcome is FeedbackOutcome.UNKNOWN_ANSWER:
                result_id = None
        if result_id is None:
            receipt = await feedback.record_unattributed(
                up_down, *who, source="teams", comment=comment, named_id=named[:200]
            )
    except Exception:
        log.exception("could not store native feedback")
        return InvokeResponse(status=503, body=EmptyInvokeBody())
    if result_id is None:
        log.warning(
            "native feedback %s %s unattributed in %s: %s",
            receipt.outcome.value,
            reaction,
            esc(conversation),
            f"names unknown message {esc(named, 100)}" if named else "names no message (no replyToId)",
        )
    else:
        log.info(
            "native feedback %s %s for %s (message %s)",
            receipt.outcome.value,
            reaction,
            result_id,
            esc(named, 100),
        )
    # Teams wants exactly {} back; anything else shows the user an error.
    return InvokeResponse(status=200, body=EmptyInvokeBody())


async def card_action(context: TurnContext, runtime: BotRuntime) -> InvokeResponse:
    """Action.Execute on an answer card of an earlier release: store the rating and replace the card
    with its thanks state."""
    activity = context.activity
    lang: Lang = language_of(activity.locale)
    value = activity.value if isinstance(activity.value, dict) else {}
    action: dict[str, Any] = value["action"] if isinstance(value.get("action"), dict) else {}
    if action.get("verb") != FEEDBACK_ACTION:
        log.warning("rejected card action with verb %s", esc(action.get("verb"), 40))
        return _card(error_card(t("feedback.invalid", lang)))
    rating = await rate(context, runtime, action.get("data"), lang, "card-execute")
    if not rating.stored:
        return _card(error_card(rating.message))
    try:
        stored = await runtime.feedback.stored_card(rating.result_id)
    except Exception:
        log.exception("could not read the stored card of %s", rating.result_id)
        stored = None
    if stored is None:
        return _card(error_card(rating.message))
    return _card(thanks_card(stored, rating.reaction, rating.lang))


def _card(card: dict[str, Any]) -> InvokeResponse:
    body = AdaptiveCardInvokeResponse(status_code=200, type=CARD_CONTENT_TYPE, value=card)
    return InvokeResponse(status=200, body=body)


def _feedback_text(raw: Any) -> str:
    if not isinstance(raw, str) or not raw.strip():
        return ""
    try:
        data = json.loads(raw)
    except ValueError:
        return raw.strip()[:2000]
    text = data.get("feedbackText") if isinstance(data, dict) else None
    return text.strip()[:2000] if isinstance(text, str) else ""
