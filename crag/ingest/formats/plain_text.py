"""Plain text as Markdown, where its layout already says what Markdown would: a title or section
underlined with ==== or ---- (setext headings) becomes a header, and a block of lines whose columns
are aligned with runs of spaces becomes a table.

Without this a text file is one headerless section, and an aligned table reads as one long run of
words: "Data  Retention period  Applicants ... 1 year  Visitor records ... 3 years", so no single
sentence ties "CCTV footage" to "30 days". As a table, each row is quoted as "Data: CCTV footage at
the plants; Retention period: 30 days" (crag/text/sentences.py).
"""

from __future__ import annotations

import re

from crag.ingest.formats.common import heading, table

_UNDERLINE = re.compile(r"^\s*(=+|-+)\s*$")
# Columns are separated by two or more spaces (an ideographic space counts as two).
_GAP = re.compile(r"(?: {2,}|\t+|\u3000+)")
_MIN_ROWS = 3  # a header and two rows: two aligned lines are as likely a coincidence


def structured(text: str) -> tuple[str, bool]:
    """(the text as Markdown, whether any structure was found). Unchanged when none was."""
    lines = text.split("\n")
    out: list[str] = []
    found = False
    i = 0
    while i < len(lines):
        line = lines[i]
        following = lines[i + 1] if i + 1 < len(lines) else ""
        underline = _UNDERLINE.match(following)
        if line.strip() and underline and len(following.strip()) >= 3 and not _UNDERLINE.match(line):
            out.append(heading(1 if underline.group(1)[0] == "=" else 2, line.strip()))
            found = True
            i += 2
            continue
        rows = _aligned_block(lines, i)
        if rows:
            out.append(table(rows))
            found = True
            i += len(rows)
            continue
        out.append(line)
        i += 1
    return ("\n".join(out), True) if found else (text, False)


def _aligned_block(lines: list[str], start: int) -> list[list[str]]:
    """The rows of an aligned table starting at `start`: consecutive non-empty lines that all split
    into the same number (two or more) of cells; [] when there are fewer than _MIN_ROWS of them."""
    rows: list[list[str]] = []
    width = 0
    # By index: lines[start:] (a copy of the rest of the file at every line) made a long file's
    # reading quadratic (53 s of a 6 MB text folder's build).
    for k in range(start, len(lines)):
        line = lines[k]
        if not line.strip() or line.lstrip().startswith(("#", "|", "- ", "* ")):
            break
        cells = [c for c in _GAP.split(line.strip()) if c]
        if len(cells) < 2 or (width and len(cells) != width):
            break
        width = len(cells)
        rows.append(cells)
    return rows if len(rows) >= _MIN_ROWS else []
