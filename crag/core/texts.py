"""The engine's own words, in Japanese and English: the fixed refusal, the note on a passage quoted
from a document in the other language, and the statement that the documents lack the asked fact. The
app's catalog (hosting/ui_texts) adds these to its own, so the cards and the feedback export compare
against the same strings."""

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

# Said first when the passages are about the question's topic but none holds a fact of the kind it
# asks for (no amount for "how much?"): ABSENT[language] with {what}, from KIND_NAMES, then the
# nearest passage after NEAREST. Quoting a related passage without saying so reads as an answer.
ABSENT: dict[Lang, str] = {
    "ja": "社内文書には、お尋ねの{what}についての記載は見つかりませんでした。",
    "en": "The documents don't state the {what} you asked about.",
}
NEAREST: dict[Lang, str] = {"ja": "近い記載：", "en": "Nearest passage: "}
WEB_SAYS: dict[Lang, str] = {"ja": "ウェブの情報：", "en": "From the web: "}  # NEAREST for a web result
KIND_NAMES: dict[Lang, dict[str, str]] = {
    "ja": {
        "money": "金額",
        "duration": "期間",
        "date": "日付や時期",
        "count": "数",
        "percent": "割合",
        "phone": "電話番号",
        "email": "メールアドレス",
    },
    "en": {
        "money": "amount",
        "duration": "length of time",
        "date": "date or time",
        "count": "number",
        "percent": "percentage",
        "phone": "phone number",
        "email": "email address",
    },
}


# What ABSENT names when the question asks for no particular kind of fact.
ANY_FACT: dict[Lang, str] = {"ja": "件", "en": "point"}


def absence(kinds: frozenset[str], language: Lang) -> str:
    """ABSENT for the asked kinds ("count:file" is a count), in a fixed order; ANY_FACT for none."""
    names = KIND_NAMES[language]
    found = [names[k] for k in names if any(kind.split(":")[0] == k for kind in kinds)] or [
        ANY_FACT[language]
    ]
    joiner = "・" if language == "ja" else " or "
    return ABSENT[language].format(what=joiner.join(found))


def says_absent(answer: str) -> bool:
    """The answer opens with the statement that the documents lack the asked fact."""
    text = answer.lstrip()
    return any(text.startswith(ABSENT[lang].split("{what}")[0]) for lang in ABSENT)
