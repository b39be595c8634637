"""The engine's own words, in Japanese and English: the fixed refusal, and the note on a passage
quoted from a document in the other language. The app's catalog (service/texts) adds these to its own,
so the cards and the feedback export compare against the same strings."""

from __future__ import annotations

from typing import Literal

Lang = Literal["ja", "en"]

# The fixed "cannot answer from the provided information" text.
REFUSAL: dict[Lang, str] = {
    "ja": "提供された情報ではこの質問に答えることができません。",
    "en": "I cannot answer this question from the provided information.",
}

# Put before a passage quoted from a document in the other language: QUOTED_FROM[document][answer].
QUOTED_FROM: dict[Lang, dict[Lang, str]] = {
    "en": {"ja": "（英語の文書より）", "en": "(from an English document) "},
    "ja": {"ja": "（日本語の文書より）", "en": "(from a Japanese document) "},
}
