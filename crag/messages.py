"""Fixed texts the engine itself produces (the card layer owns all other user-facing strings)."""

from __future__ import annotations

from typing import Literal

REFUSAL: dict[Literal["ja", "en"], str] = {
    "ja": "提供された情報ではこの質問に答えることができません。",
    "en": "I cannot answer this question from the provided information.",
}
