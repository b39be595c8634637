"""The welcome card: who the bot is, what to ask, and example questions that ask themselves."""

from __future__ import annotations

from typing import Any

from cards.answer_card import ASK_ACTION, CARD_VERSION
from texts import Lang, t


def welcome_card(name: str, lang: Lang, examples: list[str]) -> dict[str, Any]:
    """`examples`: cards/examples.py's example_questions (none: no examples section)."""
    card: dict[str, Any] = {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": CARD_VERSION,
        "msteams": {"width": "Full"},
        "body": [
            {"type": "TextBlock", "text": name, "weight": "Bolder", "size": "Medium", "wrap": True},
            {"type": "TextBlock", "text": t("welcome", lang, name=name), "wrap": True, "id": "welcome"},
        ],
        "actions": [
            {"type": "Action.Submit", "title": q, "data": {"action": ASK_ACTION, "question": q}}
            for q in examples[:5]
        ],
    }
    if examples:
        card["body"].append(
            {"type": "TextBlock", "text": t("examples", lang), "weight": "Bolder", "size": "Small"}
        )
    return card
