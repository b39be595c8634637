"""The parts of a question that asks for more than one thing.

"ITヘルプデスクの内線と受付時間おしえて", "what's the deadline, and how long do approvers have?": a
passage that answers one part is graded as relevant, and an answer from it alone would sit under the
green "from internal documents" badge with half the answer missing. The grader checks each part on
its own (crag/grade/local.py); re-searching for a missing part is the engine's job (DESIGN §3 step 5).

Splitting is by the surface only, and errs towards one part: a question wrongly kept whole is graded
as today, a question wrongly split is only held back from the green badge.
"""

from __future__ import annotations

import re
import unicodedata

# Where a second question starts: after a question mark or full stop followed by more text, at
# "あと" / "それと" / "また" after punctuation, at "…と、…" before a second noun phrase, or at
# ", and what / when / how …".
_SPLIT = re.compile(
    r"(?<=[?？。])\s*(?=\S)|"
    r"[、,]\s*(?:あと|それと|それから|また)[、,]?\s*|\s(?:あと|それと)[、,]?\s*|"
    r"[,;]\s*(?:and|also|plus)\s+(?=(?:what|when|where|who|which|how|is|are|do|does|can|could|should|"
    r"will|would|by when)\b)|"
    r"\s+and\s+(?=(?:what|when|where|who|which|how|for)\b)|"
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
