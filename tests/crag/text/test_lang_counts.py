"""The languages of passages are counted in numpy; they must be what the plain per-character
definitions give, on any text (astral characters and lone surrogates included)."""

from __future__ import annotations

import random

from crag.text.lang import _JAPANESE, letter_counts, passage_language, text_language


def _plain(text: str) -> tuple[int, int, int]:
    letters = [ch for ch in text if ch.isalpha()]
    return len(letters), len(_JAPANESE.findall(text)), sum(1 for ch in letters if _JAPANESE.match(ch))


def test_counts_and_languages_match_the_per_character_definitions() -> None:
    rng = random.Random(5)
    ranges = [(0, 0x2FFF), (0x3000, 0xFFFF), (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0x10000, 0x2FFFF),
              (0xD800, 0xDFFF), (32, 126)]  # fmt: skip
    texts = ["", "VPNの設定は？", "The dormitory (寮) is near the station.", "ー・「」"]
    for _ in range(3000):
        texts.append("".join(chr(rng.randint(*rng.choice(ranges))) for _ in range(rng.randint(0, 80))))
    for text in texts:
        letters, japanese, japanese_letters = _plain(text)
        assert letter_counts(text) == (letters, japanese, japanese_letters), repr(text)
        assert text_language(text) == ("ja" if letters and japanese >= 0.2 * letters else "en")
        assert passage_language(text) == ("ja" if letters and japanese_letters / letters >= 0.2 else "en")
