"""The welcome card: who the bot is, what to ask, and example questions that ask themselves."""

from __future__ import annotations

from typing import Any

from cards.answer_card import ASK_ACTION, CARD_VERSION
from hosting.ui_texts import Lang, t


def welcome_card(name: str, lang: Lang, examples: list[str]) -> dict[str, Any]:
    """`examples`: hosting/examples.py's example_questions (none: no examples section).

    Each example is a wrapping line the user clicks (a Container's selectAction), not a button: a
    button's title is cut off with "…" where actions sit side by side (Teams), and an example
    nobody can read is no example."""
    body: list[dict[str, Any]] = [
        {"type": "TextBlock", "text": name, "weight": "Bolder", "size": "Medium", "wrap": True},
        {"type": "TextBlock", "text": t("welcome", lang, name=name), "wrap": True, "id": "welcome"},
    ]
    if examples:
        body.append({"type": "TextBlock", "text": t("examples", lang), "weight": "Bolder", "size": "Small"})
        body.append(
            {
                "type": "Container",
                "id": "examples",
                "items": [
                    {
                        "type": "Container",
                        "style": "emphasis",
                        "spacing": "Small",
                        "selectAction": {
                            "type": "Action.Submit",
                            "title": q,
                            "data": {"action": ASK_ACTION, "question": q},
                        },
                        "items": [{"type": "TextBlock", "text": f"💬 {q}", "wrap": True, "color": "Accent"}],
                    }
                    for q in examples[:5]
                ],
            }
        )
    return {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": CARD_VERSION,
        "msteams": {"width": "Full"},
        "body": body,
    }


def example_actions(card: dict[str, Any]) -> list[dict[str, Any]]:
    """The example questions' actions of a welcome card (what a click sends)."""
    examples = next((b for b in card.get("body", []) if b.get("id") == "examples"), None)
    return [item["selectAction"] for item in examples["items"]] if examples else []
