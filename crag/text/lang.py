"""Which language a text is in: only the distinction the product needs (Japanese or English)."""

from __future__ import annotations

import re
from typing import Literal

_JAPANESE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff66-\uff9f]")


def detect_language(text: str) -> Literal["ja", "en"]:
    # Any kana or kanji makes a question Japanese: mixed questions ("VPNの設定は？") are common.
    return "ja" if _JAPANESE.search(text) else "en"


def passage_language(text: str) -> Literal["ja", "en"]:
    """'ja' when at least a fifth of a passage's letters are Japanese: an English passage may name
    a 寮, so one kanji does not make it Japanese as it does a question."""
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return "en"
    japanese = sum(1 for ch in letters if _JAPANESE.match(ch))
    return "ja" if japanese / len(letters) >= 0.2 else "en"


def text_language(text: str) -> Literal["ja", "en"]:
    """The main language of a passage as the retrieval ranks it: Japanese when Japanese characters
    (kana and kanji, their punctuation included) number at least a fifth of its letters."""
    letters = sum(ch.isalpha() for ch in text)
    if not letters:
        return "en"
    return "ja" if len(_JAPANESE.findall(text)) >= 0.2 * letters else "en"
