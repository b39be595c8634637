"""The parts of a question that asks for more than one thing.

"ITヘルプデスクの内線と受付時間おしえて", "what's the deadline, and how long do approvers have?": a
passage that answers one part is graded as relevant, and an answer from it alone would sit under the
green "from internal documents" badge with half the answer missing. The grader checks each part on
its own (crag/stages/grade/local.py); re-searching for a missing part is the engine's job.

Splitting is by the surface only, and errs towards one part: a question wrongly kept whole is graded
as today, a question wrongly split is only held back from the green badge.
"""

from __future__ import annotations

import re
import unicodedata
from itertools import pairwise

from crag.core.models import Turn
from crag.text.followup import leans_on_previous

# Where a second question starts: after a question mark or full stop followed by more text, at
# "あと" / "それと" / "また" after punctuation, at "…と、…" before a second noun phrase, at
# "…て、" (「休みは何日もらえて、お祝い金はいくら？」; not inside 「」; a piece that asks nothing is only
# context), or at
# ", and what / when / how …".
_SPLIT = re.compile(
    r"(?<=[?？。])\s*(?=\S)|"
    r"[、,]\s*(?:あと|それと|それから|また)[、,]?\s*|\s(?:あと|それと)[、,]?\s*|"
    r"[,;]\s*(?:and|also|plus)\s+(?=(?:what|when|where|who|which|how|is|are|do|does|can|could|should|"
    r"will|would|by when)\b)|"
    r"\s+and\s+(?=(?:what|when|where|who|which|how|for|by\s+when)\b)|"
    r"(?:(?<=て)|(?<=んで))[、,]\s*(?![^「]*」)|"
    r"[,;]\s*and\s+(?=(?:after|for|in|within)\s+(?:how|what|which)\b)|"
    r"[,;]\s*(?:and\s+)?also\s+",
    re.IGNORECASE,
)
# A piece that asks something; a piece that does not ("一般社員です", "80万円くらいの測定器を買いたい。")
# is context for its neighbour, not a part.
_ASKS = re.compile(
    r"[?？]|何|いつ|どこ|誰|だれ|いくら|いくつ|どう|どれ|どの|どんな|教えて|おしえて|知りたい|"
    r"\b(?:what'?s|what|when|where|who|whom|which|how|why|whether|is|are|can|could|do|does|should|tell me)\b",
    re.IGNORECASE,
)
# "…AのX と、BのY は？": two noun phrases sharing the ask.
_AND = re.compile(r"(?<=[^\s、,])と[、,]\s*")
# "AとB、…それぞれ / 両方": one question asked of two things.
# 「と」 of 「とき」「として」「という」「とも」 is not a conjunction (「失くしたときのCSIRT」).
_NOT_AND = r"(?:き|して|いう|いった|も)"
_EACH = re.compile(
    rf"^(?P<a>(?:[^、,と]|と(?={_NOT_AND}))" + r"{2,})" + rf"と(?!{_NOT_AND})"
    r"(?P<b>[^、,]{2,})[、,](?P<rest>.*(?:それぞれ|両方|どちらも).*)$"
)
# Short pieces ("で？", "and?") are not a part of their own.
_MIN_CHARS = 4
# A conjunction opening a later part ("…？あと再検査は？") joins it to the one before; left in, it
# becomes a search keyword of its own (あと: 後, "after").
_LEADING = re.compile(r"^(?:(?:あと|それと|それから|また)[、,]?\s*|(?:and|also|plus)\s+)", re.IGNORECASE)


def question_parts(question: str) -> list[str]:
    """The question's parts, or the question alone when it asks for one thing."""
    text = unicodedata.normalize("NFKC", question).strip()
    each = _EACH.match(text)
    if each:
        rest = each.group("rest")
        return [f"{each.group('a')} {rest}", f"{each.group('b')} {rest}"]
    parts: list[str] = []
    context = ""
    for piece in (p.strip(" 、,;") for p in _SPLIT.split(text)):
        if len(piece) < _MIN_CHARS:
            continue
        if not _ASKS.search(piece):
            if parts:
                parts[-1] = f"{parts[-1]} {piece}"
            else:
                context = f"{context} {piece}".strip()
            continue
        parts.append(f"{context} {piece}".strip() if context else piece)
        context = ""
    parts = [p for part in parts for p in _AND.split(part) if len(p) >= _MIN_CHARS]
    parts = parts[:1] + [_LEADING.sub("", p, count=1) for p in parts[1:]]
    return parts if len(parts) >= 2 else [question]


def read_in_context(parts: list[str]) -> list[str]:
    """The parts as searched and graded. "…, and how many seats does it have?", "…, and after how
    long?": a part that leans on the one before it is read with it, as a follow-up is read with the
    previous turn; alone it is searched and graded as "seats" or "how long", which finds anything.
    (The answer is written per part as asked: the earlier part is answered on its own.)"""
    return parts[:1] + [
        f"{before} {part}" if _leans_on(before, part) else part for before, part in pairwise(parts)
    ]


def _leans_on(before: str, part: str) -> bool:
    words = _content_words(part)
    # A part naming nothing ("after how long?") cannot stand alone.
    return words == 0 or leans_on_previous(part, (Turn(question=before),), words)


# Words that ask rather than name ("how many … does it have"): not counted as content.
_FUNCTION_WORDS = frozenset(
    "a an the is are was were be do does did can could should would will it its they them this that "
    "what whats what's when where who which how why many much long often of in on at to for from by "
    "with and or i we you my our your me us there have has after before".split()
)
# Japanese content words are mostly written in kanji or katakana; particles and endings in kana.
_JA_WORD = re.compile(r"[\u4e00-\u9fff\u30a0-\u30ff]+")


def _content_words(text: str) -> int:
    """About how many content words a part has, from its surface (no tokenizer here): a part of one
    or two rarely names its own subject."""
    english = [w for w in re.findall(r"[a-z0-9']+", text.lower()) if w not in _FUNCTION_WORDS]
    japanese = [w for w in _JA_WORD.findall(text) if w not in ("何",)]
    return len(english) + len(japanese)
