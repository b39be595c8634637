"""Sentence splitting for Japanese and English prose, good enough for chunking and extraction.

Markdown structure is respected: each list item is its own unit, and each table row becomes a
sentence of "header: value" pairs, so an extracted row still says what its numbers mean.
"""

from __future__ import annotations

import re

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
