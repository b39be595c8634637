"""The answer's form: what makes an answer read like a pasted fragment rather than a reply.

Each check is one kind of defect an employee sees at a glance; an answer may have several. The
evaluation counts them on every set, beside contains-gold and confidently wrong, so a change that
makes answers read better (or worse) shows in numbers, not in impressions.

    title_lead      starts with a document title in brackets (「【倉庫内安全規程】本規程は…」)
    scope_lead      starts with a scope sentence ("本規程は…を定める", "This policy applies to…")
                    instead of the fact
    whitespace_run  three or more spaces in a row (table cells run together)
    cell_run        a table row printed as its cells ("区分: 単身; 月額: ¥10,800") instead of a sentence
    empty_cell      an empty table cell, or one printed as "none" / "None" / "nan"
    dangling_marker a list marker with nothing after it ("・" or "1." at a line's end)
    over_budget     longer than the answer budget (citation markers and source titles count, the
                    other-language note does not: the composer's own rule)
    mixed_language  a passage in the other language joined in without the note that says so
"""

from __future__ import annotations

import re

from crag.core.texts import QUOTED_FROM, REFUSAL, Lang

DEFECTS = (
    "title_lead",
    "scope_lead",
    "whitespace_run",
    "cell_run",
    "empty_cell",
    "dangling_marker",
    "over_budget",
    "mixed_language",
)

_TITLE_LEAD = re.compile(r"^\s*【[^】]{1,80}】")
_SCOPE_LEAD = re.compile(
    r"^\s*(?:(?:本|この)(?:規程|規則|規定|要領|ガイド|ガイドライン|マニュアル|文書|方針|手順書?|制度)"
    r"(?:は|では|において|の目的は)[^。]{0,80}?(?:定め|適用|対象と|説明|まとめ|目的と|規定す)"
    r"|(?:This|The)\s+(?:policy|document|guide|guideline|manual|procedure|rule|standard)s?\s+"
    r"(?:applies|apply|describes|describe|sets\s+out|defines|define|covers|cover|explains|outlines|"
    r"is\s+intended|establishes))",
    re.IGNORECASE,
)
_WHITESPACE_RUN = re.compile(r"[ \t\u3000]{3,}")
# Two "header: value" cells in a row, joined by "; " (crag/text/sentences.py writes rows so).
_CELL_RUN = re.compile(r"[^;:：\n]{1,40}: [^;\n—]{1,120}; [^;:：\n.。—]{1,40}: ")
_EMPTY_CELL = re.compile(r"\|\s*\|")
# "None" / "nan" as a value, not as an English word inside a sentence ("none of the above").
_NONE_VALUE = re.compile(r"(?:^|[\s|:：、,(（])(?:None|NaN|nan)(?=\s*(?:$|[|,、。.)）]))")
_NONE_IN_JA = re.compile(r"(?<![A-Za-z])none(?![A-Za-z])")
_DANGLING = re.compile(r"(?:^|\n)[ \t]*(?:[-*・•●]|\d{1,2}[.)．）])[ \t]*(?=\n|$)")
_MARKER = re.compile(r"\s*\[\d+\]")
# A run of English words (six or more) or of Japanese script (eight or more characters).
_ENGLISH_RUN = re.compile(r"[A-Za-z][A-Za-z'’-]*(?:[ ,]+[A-Za-z][A-Za-z'’-]*){5,}")
_JAPANESE_RUN = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]{8,}")


def _notes(answer_lang: Lang) -> list[str]:
    return [QUOTED_FROM[doc][answer_lang].strip() for doc in QUOTED_FROM]


def form_defects(answer: str, language: Lang, budget: int) -> list[str]:
    """The defects of `answer` (in the question's `language`), in DEFECTS order; [] for a clean one.
    The fixed refusal has none: it is the engine's own sentence."""
    text = answer.strip()
    if not text or text == REFUSAL[language]:
        return []
    found: set[str] = set()
    if _TITLE_LEAD.match(text):
        found.add("title_lead")
    if _SCOPE_LEAD.match(_TITLE_LEAD.sub("", text, count=1)):
        found.add("scope_lead")
    if _WHITESPACE_RUN.search(text):
        found.add("whitespace_run")
    if _CELL_RUN.search(text):
        found.add("cell_run")
    none_in_ja = language == "ja" and _NONE_IN_JA.search(text)
    if _EMPTY_CELL.search(text) or _NONE_VALUE.search(text) or none_in_ja:
        found.add("empty_cell")
    if _DANGLING.search(text):
        found.add("dangling_marker")
    notes = _notes(language)
    counted = text
    for note in notes:
        counted = counted.replace(note, "")
    if len(counted.strip()) > budget:
        found.add("over_budget")
    if not any(note in text for note in notes):
        bare = _MARKER.sub("", text)
        other = _ENGLISH_RUN if language == "ja" else _JAPANESE_RUN
        if other.search(bare):
            found.add("mixed_language")
    return [d for d in DEFECTS if d in found]
