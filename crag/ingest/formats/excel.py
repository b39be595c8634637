"""Excel (.xlsx) → Markdown with openpyxl: each worksheet a "## <sheet>" section holding its table.

The workbook is opened read-only (streamed, so large files do not load whole) with data_only, which
gives the values Excel last computed rather than formula text. The first non-empty row is the header.
Sheets are capped at MAX_ROWS rows and MAX_COLUMNS columns, and the text says when something was cut.
"""

from __future__ import annotations

import datetime as dt
import io
from typing import Any

import openpyxl

from crag.ingest.formats.common import (
    Converted,
    FormatError,
    assemble,
    check_office_zip,
    heading,
    normalize_rows,
    property_title,
    table_sections,
)

MAX_ROWS = 2000  # data rows per sheet (after the header): beyond this a sheet is data, not a document
MAX_COLUMNS = 50
MAX_CELL_CHARS = 500


def convert(data: bytes) -> Converted:
    check_office_zip(data, "xlsx")
    workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    try:
        sections: list[str] = []
        for sheet in workbook.worksheets:
            sections.extend(_sheet(sheet))
        title = property_title(workbook.properties.title)
    finally:
        workbook.close()  # read-only workbooks keep the archive open until closed
    if not sections:
        raise FormatError("no data in any sheet")
    return Converted(title=title, text=assemble(title, sections))


def _sheet(sheet: Any) -> list[str]:
    declared_rows = sheet.max_row if isinstance(sheet.max_row, int) else None
    # The stored dimension of a sheet is sometimes wrong (some writers leave "A1"); read what is there.
    sheet.reset_dimensions()
    rows: list[list[str]] = []
    wide = truncated = False
    for raw in sheet.iter_rows():
        values = [_value(c) for c in raw]
        if not any(values):
            continue
        if len(rows) > MAX_ROWS:  # header + MAX_ROWS data rows are kept
            truncated = True
            break
        wide = wide or len(values) > MAX_COLUMNS
        rows.append(values[:MAX_COLUMNS])
    cells = normalize_rows(rows)
    if not cells:
        return []
    blocks = [heading(2, sheet.title)]
    notes = []
    if truncated:
        size = f" (it has {declared_rows} rows)" if declared_rows and declared_rows > MAX_ROWS else ""
        notes.append(f"Only the first {MAX_ROWS} data rows of this sheet are included{size}.")
    if wide:
        notes.append(f"Only the first {MAX_COLUMNS} columns are included.")
    if notes:
        blocks.append("Note: " + " ".join(notes))
    blocks.extend(table_sections(cells, 3))
    return blocks


def _value(cell: Any) -> str:
    value = getattr(cell, "value", None)
    if value is None:
        return ""
    text = _format(value, str(getattr(cell, "number_format", "") or ""))
    return text if len(text) <= MAX_CELL_CHARS else text[: MAX_CELL_CHARS - 1] + "…"


def _format(value: object, number_format: str) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, dt.datetime):
        if value.time() == dt.time(0, 0):
            return value.date().isoformat()
        return value.isoformat(sep=" ", timespec="seconds" if value.second else "minutes")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (int, float)):
        if "%" in number_format:
            return f"{value * 100:.12g}%"
        if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        # Excel shows at most 15 significant digits: 0.1 + 0.2 reads 0.3 there, and so here.
        return f"{value:.15g}" if isinstance(value, float) else str(value)
    return str(value)
