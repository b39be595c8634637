"""Which language a text is in: only the distinction the product needs (Japanese or English)."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

import numpy as np

_JAPANESE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff66-\uff9f]")


def detect_language(text: str) -> Literal["ja", "en"]:
    # Any kana or kanji makes a question Japanese: mixed questions ("VPNの設定は？") are common.
    return "ja" if _JAPANESE.search(text) else "en"


def passage_language(text: str) -> Literal["ja", "en"]:
    """'ja' when at least a fifth of a passage's letters are Japanese: an English passage may name
    a 寮, so one kanji does not make it Japanese as it does a question."""
    letters, _, japanese = letter_counts(text)
    if not letters:
        return "en"
    return "ja" if japanese / letters >= 0.2 else "en"


_LETTER, _KANA_KANJI = 1, 2  # bits of _class_table()


@lru_cache(maxsize=1)
def _class_table() -> np.ndarray:
    """Per code point of the Basic Multilingual Plane: _LETTER where str.isalpha, _KANA_KANJI where
    _JAPANESE matches (all its ranges are in the plane). 64 KB, made once."""
    table = np.array([chr(c).isalpha() for c in range(0x10000)], dtype=np.uint8)
    for c in range(0x10000):
        if _JAPANESE.match(chr(c)):
            table[c] |= _KANA_KANJI
    return table


def letter_counts(text: str) -> tuple[int, int, int]:
    """(letters as str.isalpha counts them, characters _JAPANESE matches, letters it matches),
    counted in numpy: Python loops over every character took 9 s of a restart at 100,000 chunks."""
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    bmp = codes < 0x10000
    classes = _class_table()[codes[bmp]]
    letters = int(np.count_nonzero(classes & _LETTER))
    if not bmp.all():  # _JAPANESE's ranges are all in the plane: these are never Japanese
        letters += sum(chr(int(c)).isalpha() for c in codes[~bmp])
    japanese_letters = int(np.count_nonzero(classes == _LETTER | _KANA_KANJI))
    return letters, int(np.count_nonzero(classes & _KANA_KANJI)), japanese_letters


def text_language(text: str) -> Literal["ja", "en"]:
    """The main language of a passage as the retrieval ranks it: Japanese when Japanese characters
    (kana and kanji, their punctuation included) number at least a fifth of its letters."""
    letters, japanese, _ = letter_counts(text)
    if not letters:
        return "en"
    return "ja" if japanese >= 0.2 * letters else "en"
