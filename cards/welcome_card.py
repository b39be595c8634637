"""The welcome card: who the bot is, what to ask, and example questions that ask themselves."""

from __future__ import annotations

from typing import Any

from cards.answer_card import ASK_ACTION, CARD_VERSION
from cards.strings import Lang, t

EXAMPLES: dict[Lang, list[str]] = {
    "ja": [
        "有給休暇の繰越しは最大何日までできますか？",
        "経費精算の締め切りはいつですか？",
        "VPN に接続できないときは？",
    ],
    "en": [
        "How many days a week can I work from home?",
        "What are the incident severity levels?",
        "Which Wi-Fi should visitors use?",
    ],
}


def welcome_card(name: str, lang: Lang, examples: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "AdaptiveCard",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "version": CARD_VERSION,
        "msteams": {"width": "Full"},
        "body": [
            {"type": "TextBlock", "text": name, "weight": "Bolder", "size": "Medium", "wrap": True},
            {"type": "TextBlock", "text": t("welcome", lang, name=name), "wrap": True, "id": "welcome"},
            {"type": "TextBlock", "text": t("examples", lang), "weight": "Bolder", "size": "Small"},
        ],
        "actions": [
            {"type": "Action.Submit", "title": q, "data": {"action": ASK_ACTION, "question": q}}
            for q in (examples or EXAMPLES[lang])[:5]
        ],
    }
