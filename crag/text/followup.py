"""Does a question lean on the previous turn ("what about the plants?", 「じゃあ管理職だと？」), or
stand on its own? Only a question that leans on it is read with the previous question: a
self-contained next question searched with the previous keywords finds the previous answer again."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from crag.core.models import Turn

# Opening words that carry the conversation on: "and …", "what about …", 「じゃあ…」「その場合…」.
_OPENERS = re.compile(
    r"^\s*(?:(?:ok(?:ay)?|got it|nice|thanks|great|i see|cool|oh)\b[\s,.!]*)?"
    r"(?:and\b|also\b|what about\b|how about\b|what if\b|then\b|same\b|but\b|wait\b|btw\b|by the way\b|"
    r"じゃあ|じゃ、|では|それなら|それって|それで|あと|ちなみに|なら|で、|その場合|そのとき|その時|同じ|でも|あ、でも)",
    re.I,
)
# Words that point back at something the previous turn named.
_POINTERS = re.compile(
    r"(それ(?!ぞれ)|その(?!日|後|他|ほか|まま)|そこ|あれ|同じ|こっち|そっち|"
    r"\b(?:[iI]ts?|[tT]hose|[tT]hem|the same|this one|that one)\b)",
)
# A closing "btw" / "tho" adds to what was said before: "i'm on the night shift btw".
_CLOSERS = re.compile(r"\b(?:btw|tho)\s*[?？.!]*\s*$", re.I)
# Referring phrases that hold in a question of any length: 「その場合」「そのとき」.
_STRONG = re.compile(r"その場合|そのとき|その時|その際|それ以外|同じ条件|\bthat\s*[?？.!]*\s*$")
# "that" pointing at what was said ("does that change if …", "on that day", "is that ok?"): after a
# verb or a preposition and not opening a clause of its own. After a noun it is a relative pronoun
# ("the form that HR sends"), before a subject a conjunction ("does it mean that I …").
_THAT = re.compile(
    r"\b(?:does|do|did|is|was|are|will|would|can|could|should|about|for|with|on|in|at|of|to|from|"
    r"after|before|during|like|than|change|changes|affect|affects|cover|covers|apply|mean|count|include)"
    r"\s+that\b(?!\s+(?:i|you|we|they|he|she|it|there|the|a|an|my|our|your|his|her|their|this|is|was)\b)",
    re.I,
)
# Where a question says something first ("… this month, will that come out of my pay?", "… on my
# first day or is that covered?"), its "that" points at what it said.
_SAID_BEFORE = re.compile(r"[,.;:!?、。，]|\b(?:or|and|but)\b", re.I)


def _points_back(text: str) -> bool:
    """A "that" pointing at the previous turn: not at what the question said before it."""
    found = _THAT.search(text)
    return found is not None and not _SAID_BEFORE.search(text[: found.start()])


# "it" as a dummy subject ("is it ok to …", "it is allowed to …") points at nothing.
_DUMMY_IT = re.compile(
    r"\b(?:is|was|would|will)\s+it\s+(?:ok|okay|possible|allowed|fine|true|necessary)\b|\bit\s+(?:is|'s)\s+\w+\s+to\b",
    re.I,
)
# A short Japanese question ending in 「…だと？」「…の場合は？」「…だったら？」 asks about a new case of
# the topic; a short statement ending in 「…なんだけど」「…んですが」 gives the previous question a new
# condition.
_JA_CASE = re.compile(
    r"(?:だと|なら|たら|場合は|ときは|時は|のほうは|の方は|も同じ)[？?]?\s*$|だと[^、。]{0,6}[？?]\s*$|"
    r"(?:んだ|んです)(?:けど|けれど|が)[…。.!！]*\s*$"
)
_JA_TOPIC_ONLY = re.compile(r"は[？?]\s*$")


# Terms that say how to go about something, not what it is about: 「申請の期限は？」, "who do i
# contact?", "which form?" name no subject of their own, like "by when?" (normalized terms, English
# stemmed as crag/text/tokenize.py does).
PROCEDURE_TERMS = frozenset(
    """
    申請 期限 手続き 方法 締め切り 必要 書類 窓口 担当 連絡 先 提出 条件 対象 申し込み 承認 届け出 用紙
    appli deadlin form approv submit procedur process contact need paperwork request step anyth someth
    """.split()
)


def subject_words(terms: Sequence[str]) -> int:
    """How many of a question's content terms could name its subject."""
    return sum(term not in PROCEDURE_TERMS for term in terms)


def leans_on_previous(
    question: str,
    history: Sequence[Turn] = (),
    content_words: int | None = None,
    subject_words: int | None = None,
) -> bool:
    """True when the question needs the previous turn to be understood. content_words: how many
    content words it has (a question of one or two rarely names its subject); subject_words: how
    many of them could name its subject (subject_words())."""
    if not history:
        return False
    text = unicodedata.normalize("NFKC", question).strip()
    # A question of no content word of its own ("by when?", 「いつまで？」), or only of how to go about
    # it (「申請の期限は？」), has nothing else to ask about.
    if (content_words == 0 or subject_words == 0) and text:
        return True
    if _OPENERS.search(text) or _CLOSERS.search(text) or _STRONG.search(text) or _points_back(text):
        return True
    # A pointer in a long question usually points inside it ("… bin it right away?"); in a short
    # one, at the previous turn.
    short = content_words is not None and content_words <= 4
    if short and _POINTERS.search(_DUMMY_IT.sub(" ", text)):
        return True
    if _JA_CASE.search(text) and len(text) <= 20:
        return True
    # 「3直のほうは？」: a bare topic and は？ (not 「ラオスの首都は？」, which names what it asks).
    return bool(_JA_TOPIC_ONLY.search(text)) and content_words is not None and content_words <= 1


def in_context(
    question: str,
    history: Sequence[Turn],
    content_words: int | None = None,
    subject_words: int | None = None,
) -> str:
    """The question as read with the turns it leans on (the previous questions first), or as it is."""
    if not leans_on_previous(question, history, content_words, subject_words):
        return question
    return with_previous(question, history)


def with_previous(question: str, history: Sequence[Turn]) -> str:
    """The question read after the previous one, whether or not it points back at it."""
    if not history:
        return question
    # The previous question may itself have been a follow-up: read it in its own context too (one step).
    previous = history[-1].question
    if len(history) > 1 and leans_on_previous(previous, history[:-1]):
        previous = f"{history[-2].question} {previous}"
    return f"{previous} {question}"
