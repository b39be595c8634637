"""CSV → Markdown: the whole file as one table (first row = header) under the file name as title.

The stdlib csv module is enough: the dialect (comma, semicolon, tab, pipe; quoting) is sniffed from the
start of the file, and the encodings Japanese offices produce are tried in turn: UTF-8 (with or without
the BOM Excel writes) and Shift_JIS (cp932, Excel's default "CSV" on Japanese Windows).
"""

from __future__ import annotations

import csv
import io

from crag.ingest.formats.common import (
    Converted,
    FormatError,
    assemble,
    check_binary_text,
    normalize_rows,
    table_sections,
)

MAX_ROWS = 2000  # data rows (after the header); the text says when a file was cut
MAX_CELL_CHARS = 500
_SNIFF_CHARS = 64 * 1024


def convert(data: bytes, name: str) -> Converted:
    check_binary_text(data)
    text = _decode(data)
    if not text.strip():
        raise FormatError("the file is empty")
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(text[:_SNIFF_CHARS], ",;\t|")
    except csv.Error:
        dialect = csv.excel  # a single column or too little text to tell: plain commas
    rows: list[list[str]] = []
    truncated = False
    try:
        for row in csv.reader(io.StringIO(text, newline=""), dialect):
            if not any(v.strip() for v in row):
                continue
            if len(rows) > MAX_ROWS:
                truncated = True
                break
            rows.append([v if len(v) <= MAX_CELL_CHARS else v[: MAX_CELL_CHARS - 1] + "…" for v in row])
    except csv.Error as exc:
        raise FormatError(f"malformed CSV ({exc})") from exc
    cells = normalize_rows(rows)
    if not cells:
        raise FormatError("the file is empty")
    blocks = []
    if truncated:
        blocks.append(f"Note: only the first {MAX_ROWS} data rows of this file are included.")
    blocks.extend(table_sections(cells, 2))
    return Converted(title=name, text=assemble(name, blocks))


def _decode(data: bytes) -> str:
    for encoding in ("utf-8-sig", "cp932"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise FormatError("not valid UTF-8 or Shift_JIS (cp932) text")
