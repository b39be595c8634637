"""Sentence splitting for Japanese and English prose, good enough for chunking and extraction.

Markdown structure is respected: each list item is its own unit, and each table row becomes a
sentence of "header: value" pairs, so an extracted row still says what its numbers mean. Quoted in an
answer, such a row is said as a sentence of its own words (row_as_sentence).
"""

from __future__ import annotations

import re

from crag.text.lang import detect_language
from crag.text.question import has_number

# Japanese sentences end with 。！？ (full or half width); English ones with .!? followed by space.
# A closing bracket or quote right after the terminator stays with its sentence.
_BOUNDARY = re.compile(
    r"(?<=[。！？!?])(?![」』）)\"'”’])\s*"
    r"|(?<=[.])[\"'”’)\]]*\s+(?=[A-Z0-9\"“(\[])"
)
# Where _BOUNDARY's matches start, with the terminator (or line break) matched before the offset.
_ENDS = re.compile(r"[。！？!?](?![」』）)\"'”’])|\.(?=[\"'”’)\]]*\s+[A-Z0-9\"“(\[])|\n")
# Abbreviations after which a period does not end an English sentence.
_ABBREVIATIONS = re.compile(
    r"\b(?:e\.g|i\.e|etc|vs|Mr|Mrs|Ms|Dr|Prof|St|No|Inc|Ltd|Co|Corp|U\.S|approx|ca|cf|Jan|Feb|Mar|Apr|"
    r"Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.$"
)
# Abbreviations that stand before a number ("ext. 4100", "No. 3", "Approx. 5 days", "p. 12"): their
# period ends no sentence when a digit follows, whatever their case.
_BEFORE_NUMBER = re.compile(
    r"\b(?:ext|tel|fax|no|nos|approx|p|pp|fig|art|sec|vol|para|ch|ver|rev|rm|bldg)\.$", re.I
)
# A list item's marker: "- ", "1. ", "(1)", "・".
# Not a section number: "1.2 取得単位は…" keeps its "1.2".
LIST_ITEM = _LIST_ITEM = re.compile(r"^\s*(?:[-*+•・]|\d+[.)](?!\d)|[（(]?\d+[)）])\s*")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")


def split_sentences(text: str) -> list[str]:
    """Split into sentences; never returns empty strings."""
    return [s for block in split_blocks(text) for s in block]


def split_blocks(text: str) -> list[list[str]]:
    """The sentences of each block: a paragraph, a list item or a table row. A sentence after the
    first of its block goes on about what the one before it named (「35歳以上は人間ドックを受診でき
    る。会社負担の上限は¥35,000。」). Never returns empty blocks or sentences."""
    out: list[list[str]] = []
    prose: list[str] = []
    header: list[str] | None = None

    def flush() -> None:
        if prose:
            out.append(_split_prose(" ".join(prose)))
            prose.clear()

    for raw in text.split("\n"):
        line = raw.strip()
        if line.startswith("|") and line.count("|") >= 2:
            flush()
            if _TABLE_RULE.match(line):
                continue
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
            if header is None:
                header = cells
                continue
            out.append([_row_sentence(header, cells)])
            continue
        header = None
        if not line:
            flush()
        elif (item := _LIST_ITEM.match(line)) and not re.match(r"^\d+\.\d", line):
            flush()
            # The marker stays with the item's first sentence ("1. 22:00以降…" is not "1." and "22:00…").
            pieces = _split_prose(line[item.end() :]) or [""]
            out.append([f"{item.group(0).strip()} {pieces[0]}".strip(), *pieces[1:]])
        else:
            prose.append(line)
    flush()
    return [block for block in ([s for s in b if s] for b in out) if block]


def sentence_ends(text: str) -> list[int]:
    """Offsets just after each sentence end or line break, for cutting raw text without losing any."""
    # The terminator itself is matched (not looked behind for at every position): the same offsets
    # as _BOUNDARY's starts, in a fraction of the time, which counted in a large build's chunking.
    return sorted({m.end() for m in _ENDS.finditer(text)})


# A table row as _row_sentence writes it, with two cells at least: 「区分: 世帯主で単身; 月額: ¥10,800」.
_TABLE_ROW = re.compile(r"^[^;:\n]+: [^;\n]*(?:; [^;:\n]+: [^;\n]*)+$")


def is_table_row(sentence: str) -> bool:
    return bool(_TABLE_ROW.match(sentence))


# The endings of a Japanese verb or adjective: a row named so is a case (「…がいる場合の」).
_CLAUSE_END = ("い", "る", "た", "だ", "す", "う", "く", "つ", "む", "ぶ", "ぬ")
# A cell that says nothing: a dash standing for "not applicable" or "same as above".
_BLANK_CELL = frozenset({"-", "—", "–", "－", "―", "〃", "同上", "None", "none", "nan", "NaN"})


def row_as_sentence(text: str) -> str:
    """A table row ("区分: 世帯主で単身; 月額: ¥10,800", as the splitter writes it) said as a sentence
    built from its own header and cells only, in the row's language: 「世帯主で単身の月額は¥10,800で
    す。」 / "For Osaka: hotel cap — ¥18,000; notes — breakfast included." The first cell names the
    row; every other cell is said, dashes for "not applicable" dropped (a column left out once held
    the asked "who" of a two-part question). Anything else is returned unchanged."""
    if not is_table_row(text):
        return text
    pairs = [cell.split(": ", 1) for cell in text.split("; ")]
    if any(len(p) != 2 for p in pairs):
        return text
    cells = [(h.strip(), v.strip()) for h, v in pairs if h.strip() and v.strip() not in _BLANK_CELL]
    if len(cells) < 2:
        return text
    (key_header, key), rest = cells[0], cells[1:]
    # A row named by a number says what the number is: 「勤続年数が3年の場合」, not 「3年の」.
    numbered = has_number(key)
    if detect_language(text) == "ja":
        said = "、".join(f"{h}は{v}" for h, v in rest)
        end = "" if said.endswith(("。", "です", "ます")) else "です。"
        # 「世帯主ではない場合の月額」: a row named by a clause (a verb or adjective ending) is a case.
        lead = (
            f"{key_header}が{key}の場合、"
            if numbered
            else f"{key}場合の"
            if key.endswith(_CLAUSE_END)
            else f"{key}の"
        )
        return f"{lead}{said}{end}"
    said = "; ".join(f"{_lower_first(h)} — {v}" for h, v in rest)
    lead = f"Where {_lower_first(key_header)} is {key}: " if numbered else f"For {key}: "
    return f"{lead}{said}{'' if said.endswith('.') else '.'}"


def _lower_first(header: str) -> str:
    """ "Hotel cap" -> "hotel cap"; "ID", "M3 rate" unchanged (an acronym or a code)."""
    if len(header) > 1 and header[0].isupper() and header[1].islower():
        return header[0].lower() + header[1:]
    return header


def _row_sentence(header: list[str], cells: list[str]) -> str:
    pairs = []
    for i, cell in enumerate(cells):
        name = header[i] if i < len(header) else ""
        if cell:
            pairs.append(f"{name}: {cell}" if name else cell)
    return "; ".join(pairs)


def _split_prose(text: str) -> list[str]:
    pieces: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        end = match.start()
        if match.group(0).strip() == "" and _ABBREVIATIONS.search(text[start:end]):
            continue  # "e.g. Foo": not a boundary, keep accumulating
        if text[match.end() : match.end() + 1].isdigit() and _BEFORE_NUMBER.search(text[start:end]):
            continue  # "ext. 4100": the number belongs to the abbreviation
        candidate = (text[start:end] + match.group(0)).strip()
        if candidate:
            pieces.append(candidate)
        start = match.end()
    tail = text[start:].strip()
    if tail:
        pieces.append(tail)
    return pieces
