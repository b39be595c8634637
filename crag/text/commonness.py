"""How common a word is in general language (wordfreq's Zipf scale), independent of any corpus.

A small corpus makes everyday words look rare ("main", "known", 「必要」 may occur in a single
chunk), and its idf alone would let them decide relevance. General-language frequency tells
everyday words from names and technical terms, whatever the documents are.
"""

from __future__ import annotations

import math
import re
import threading
from functools import lru_cache

import wordfreq

# The "small" lists hold every word with Zipf >= 3 (about once per million words); anything rarer
# is treated as rare, which is all the weighting needs.
_RARE_ZIPF = 2.5
_LATIN = re.compile(r"^[0-9a-z'._-]+$")
_lock = threading.Lock()
_tables: dict[str, dict[str, float]] = {}


def _table(lang: str) -> dict[str, float]:
    with _lock:
        if lang not in _tables:
            _tables[lang] = wordfreq.get_frequency_dict(lang, wordlist="small")
        return _tables[lang]


@lru_cache(maxsize=100_000)
def zipf(word: str) -> float:
    """Zipf frequency (log10 of occurrences per billion words) of a lowercase word; rare -> 2.5."""
    lang = "en" if _LATIN.match(word) else "ja"
    freq = _table(lang).get(word)
    return max(_RARE_ZIPF, math.log10(freq) + 9) if freq else _RARE_ZIPF
