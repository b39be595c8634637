"""Card button clicks (Action.Submit): validate the data, store the rating, acknowledge it."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, cast

from botbuilder.core import MessageFactory, TurnContext
from pydantic import BaseModel, ValidationError, field_validator

from bot.bot_runtime import BotRuntime
from cards.answer_card import ASK_ACTION, FEEDBACK_ACTION
from feedback.protocol import FeedbackOutcome, Reaction
from hosting.logsafe import esc
from hosting.ui_texts import Lang, t

log = logging.getLogger(__name__)

_RESULT_ID = re.compile(r"^[0-9a-f]{32}$")


class FeedbackSubmit(BaseModel):
    """The data of a feedback button; anything else in a submit is treated as tampered."""

    action: str
    result_id: str
    reaction: str

    @field_validator("action")
    @classmethod
    def _action(cls, v: str) -> str:
        if v != FEEDBACK_ACTION:
            raise ValueError("unknown action")
        return v

    @field_validator("result_id")
    @classmethod
    def _rid(cls, v: str) -> str:
        if not _RESULT_ID.match(v):
            raise ValueError("malformed result id")
        return v

    @field_validator("reaction")
    @classmethod
    def _reaction(cls, v: str) -> str:
        if v not in ("up", "down"):
            raise ValueError("unknown reaction")
        return v


def followup_question(value: Any) -> str | None:
    """The question of a follow-up suggestion button, or None for any other submit."""
    if (
        isinstance(value, dict)
        and value.get("action") == ASK_ACTION
        and isinstance(value.get("question"), str)
    ):
        return cast(str, value["question"]).strip()
    return None


def is_card_submit(activity_value: Any, text: str | None) -> bool:
    return activity_value is not None and not (text or "").strip()


@dataclass(frozen=True)
class Rating:
    """What became of a rating: the text to tell the user, and whether it was stored."""

    stored: bool
    message: str
    lang: Lang
    reaction: str = ""
    result_id: str = ""


async def rate(context: TurnContext, runtime: BotRuntime, value: Any, lang: Lang, source: str) -> Rating:
    """Validate a card's feedback data and store it (the Submit and the Execute paths alike)."""
    activity = context.activity
    conversation = activity.conversation.id if activity.conversation else ""
    try:
        data = FeedbackSubmit.model_validate(value)
    except ValidationError as exc:
        log.warning(
            "rejected card feedback in %s: %s",
            esc(conversation),
            esc("; ".join(e["msg"] for e in exc.errors())),
        )
        return Rating(False, t("feedback.invalid", lang), lang)
    user_id = activity.from_property.id if activity.from_property else ""
    try:
        receipt = await runtime.feedback.record_feedback(
            data.result_id,
            "up" if data.reaction == "up" else "down",
            conversation,
            user_id,
            activity.channel_id or "",
            source=source,
        )
    except Exception:
        log.exception("could not store feedback for %s", data.result_id)
        return Rating(False, t("feedback.failed", lang), lang)
    if receipt.outcome is FeedbackOutcome.UNKNOWN_ANSWER:
        return await _unattributed(
            runtime, data, conversation, user_id, activity.channel_id or "", lang, source
        )
    log.info("feedback %s %s for %s", receipt.outcome.value, data.reaction, data.result_id)
    lang = "ja" if receipt.language == "ja" else lang  # thank in the language of the rated answer
    message = t("feedback.thanks_up" if data.reaction == "up" else "feedback.thanks_down", lang)
    if receipt.outcome is FeedbackOutcome.UPDATED:
        message = f"{message} {t('feedback.updated', lang)}"
    return Rating(True, message, lang, data.reaction, data.result_id)


async def _unattributed(
    runtime: BotRuntime,
    data: FeedbackSubmit,
    conversation: str,
    user_id: str,
    channel_id: str,
    lang: Lang,
    source: str,
) -> Rating:
    """A well-formed rating of an answer this conversation never got (not recorded, or the id was
    edited): kept apart with the id it named, never on another answer, and the user told so."""
    reaction: Reaction = "up" if data.reaction == "up" else "down"
    try:
        receipt = await runtime.feedback.record_unattributed(
            reaction, conversation, user_id, channel_id, source, named_id=data.result_id
        )
    except Exception:
        log.exception("could not store the unattributed feedback naming %s", data.result_id)
        return Rating(False, t("feedback.failed", lang), lang)
    log.warning(
        "card feedback %s %s unattributed in %s: names unknown answer %s",
        receipt.outcome.value,
        data.reaction,
        esc(conversation),
        data.result_id,
    )
    return Rating(False, t("feedback.unattributed", lang), lang, data.reaction)


async def handle_submit(context: TurnContext, runtime: BotRuntime, lang: Lang) -> None:
    """Action.Submit (Emulator, Web Chat, Teams fallback): the rating is acknowledged by a message."""
    rating = await rate(context, runtime, context.activity.value, lang, "card")
    await context.send_activity(MessageFactory.text(rating.message))
