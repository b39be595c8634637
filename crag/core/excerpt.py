"""A passage shortened for a citation's preview: it ends where a reader can stop, never mid-word.

Teams shows a citation's excerpt in its panel, the cards in their sources; cut at a fixed length it
read "…employees who wo". Japanese is cut after a sentence end (。！？) or, when none is near the
limit, after a clause (、，：); English after a sentence end or at a space. An ellipsis says the
passage goes on. Only a text with no such boundary in the second half of the limit (one long word, a
URL) is cut hard.
"""

from __future__ import annotations

import re

ELLIPSIS = "…"
# After these a Japanese or English sentence ends (a closing bracket or quote stays with it).
_SENTENCE_END = re.compile(r"[。！？!?][」』）)\"'”’]*|\.[\"'”’)\]]*(?=\s)")
# After these a Japanese clause ends; an English clause's punctuation is followed by a space.
_CLAUSE_END = re.compile(r"[、，,；;：:](?=\s|[^\x00-\x7f])|[、，；：]")
_SPACE = re.compile(r"\s+")


def excerpt(text: str, limit: int = 160) -> str:
    """`text` (whitespace runs made one space) if it fits in `limit` characters; else its longest head
    that ends at a sentence end, a clause end or a word boundary, in that order of preference, with an
    ellipsis, all within `limit`."""
    text = _SPACE.sub(" ", text).strip()
    if len(text) <= limit:
        return text
    room = text[: limit - len(ELLIPSIS)]
    # A boundary too early would leave a preview of a few words: only the second half counts.
    floor = len(room) // 2
    for pattern in (_SENTENCE_END, _CLAUSE_END):
        ends = [m.end() for m in pattern.finditer(room) if m.end() >= floor]
        if ends:
            return room[: ends[-1]].rstrip() + ELLIPSIS
    # A word boundary: the head before the last space, unless the next character already is one.
    if text[len(room)] == " ":
        return room.rstrip() + ELLIPSIS
    space = room.rfind(" ")
    if space >= floor:
        return room[:space].rstrip(" ,;:") + ELLIPSIS
    return room + ELLIPSIS
