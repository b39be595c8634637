"""Markdown building blocks shared by the converters: flattened lines, escaped table cells, tables."""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from crag.ingest.ocr.scans import ScanReport

# A table is cut into blocks of about this many characters, each repeating the header row, so that the
# chunker (default cap 1200 characters) never leaves rows without the names of their columns: the
# sentence splitter reads each row as "column: value" pairs, which needs the header in the same chunk.
TABLE_BLOCK_CHARS = 1000

# Office files are zip archives; refuse ones that would inflate past this (a "zip bomb").
MAX_UNZIPPED_BYTES = 512 * 1024 * 1024

_SPACES = re.compile(r"\s+")
_NOT_NEWLINE_SPACES = re.compile(r"[^\S\n]+")
# Lines the chunker would take for structure: a header ("# x") or a code fence (``` / ~~~).
_STRUCTURAL = re.compile(r"^\s*(#{1,6}\s|```|~~~)")
# Titles that tools put in a file's properties by default and that name nothing: "PowerPoint
# Presentation", "Document1", "無題", a file name, "Microsoft Word - plan.docx" (PDF printers).
_PLACEHOLDER_TITLE = re.compile(
    r"^(untitled|無題"
    r"|(power ?point )?(presentation|プレゼンテーション)\s*\d*"
    r"|(document|book|文書|ブック)\s*\d*"
    r"|.*\.(docx?|pptx?|xlsx?|pdf|txt|html?|csv))$",
    re.IGNORECASE,
)
_PRINTER_PREFIX = re.compile(r"^Microsoft (Word|PowerPoint|Excel) - ", re.IGNORECASE)
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


class FormatError(Exception):
    """The file is of the right kind but unusable (encrypted, empty, ...); a one-line reason, no file name."""

    def __init__(self, message: str, scan: ScanReport | None = None) -> None:
        super().__init__(message)
        self.scan = scan  # a scanned file left unread: what OCR did (counted in the build report)


@dataclass(frozen=True)
class Converted:
    title: str  # "" when the file names none: the loader uses the file name
    text: str  # Markdown
    scan: ScanReport | None = None  # the file had scanned pages: what OCR did with them


def inline(text: str) -> str:
    """Text on one line: every run of whitespace, newlines included, becomes one space."""
    return _SPACES.sub(" ", text).strip()


def body_lines(text: str) -> list[str]:
    """Lines of running text, trimmed, with runs of spaces collapsed and structural starts escaped.

    Text from a document body must never become a header or a code fence for the chunker: a PDF line
    reading "# of seats" or "```" would otherwise split or swallow the sections after it.
    """
    lines = []
    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = _NOT_NEWLINE_SPACES.sub(" ", raw).strip()
        lines.append("\\" + line if _STRUCTURAL.match(line) else line)
    return lines


def paragraph(text: str) -> str:
    """A paragraph of body text; blank lines inside are dropped so it stays one Markdown block."""
    return "\n".join(line for line in body_lines(text) if line)


def property_title(value: object) -> str:
    """A title from a file's metadata, or "" when it is missing or one of the tools' placeholders."""
    title = inline(_PRINTER_PREFIX.sub("", str(value or "")))
    return "" if _PLACEHOLDER_TITLE.match(title) else title


def heading(level: int, text: str) -> str:
    return f"{'#' * level} {inline(text)}"


def cell(value: object) -> str:
    """A table cell: one line, with | escaped so it does not end the cell."""
    if value is None:
        return ""
    return inline(str(value)).replace("|", "\\|")


def normalize_rows(rows: Iterable[Sequence[object]]) -> list[list[str]]:
    """Cells as escaped strings; rows and columns that are empty throughout are dropped, rows padded."""
    cells = [[cell(v) for v in row] for row in rows]
    cells = [row for row in cells if any(row)]
    if not cells:
        return []
    width = max(len(row) for row in cells)
    keep = [i for i in range(width) if any(i < len(row) and row[i] for row in cells)]
    return [[row[i] if i < len(row) else "" for i in keep] for row in cells]


def _line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def table(rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table, first row as header; "" when there is nothing in it."""
    cells = normalize_rows(rows)
    if not cells:
        return ""
    return _render(cells[0], cells[1:])


def _render(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    return "\n".join([_line(header), _line(["---"] * len(header)), *(_line(r) for r in body)])


def table_blocks(cells: list[list[str]], budget: int = TABLE_BLOCK_CHARS) -> list[tuple[int, int, str]]:
    """Cut a normalized table (first row = header) into tables of about `budget` characters, each with
    the header row; returns (first, last, markdown) with 1-based data-row numbers."""
    if not cells:
        return []
    header, body = cells[0], cells[1:]
    if not body:
        return [(0, 0, _render(header, []))]
    fixed = len(_line(header)) + len(_line(["---"] * len(header))) + 2
    blocks: list[tuple[int, int, str]] = []
    start, size = 0, fixed
    for i, row in enumerate(body):
        row_chars = len(_line(row)) + 1
        if i > start and size + row_chars > budget:
            blocks.append((start + 1, i, _render(header, body[start:i])))
            start, size = i, fixed
        size += row_chars
    blocks.append((start + 1, len(body), _render(header, body[start:])))
    return blocks


def assemble(title: str, blocks: Iterable[str]) -> str:
    """The document: "# title" (unless the body opens with that very header), then the blocks."""
    parts = [b.strip("\n") for b in blocks if b.strip()]
    if title and not (parts and parts[0] == heading(1, title)):
        parts.insert(0, heading(1, title))
    return "\n\n".join(parts) + "\n"


def check_binary_text(data: bytes) -> None:
    """Refuse bytes that are clearly not text (NUL bytes early on, and no UTF-16 byte order mark)."""
    if b"\x00" in data[:4096] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise FormatError("looks like a binary file, not text")


def check_office_zip(data: bytes, kind: str) -> None:
    """Reject what the Office libraries would fail on obscurely: encrypted files, non-zips, zip bombs."""
    if data.startswith(_OLE_MAGIC):
        # Office saves a password-protected .docx/.xlsx/.pptx as an encrypted OLE container, not a zip;
        # the pre-2007 binary formats (.doc/.xls/.ppt) are OLE containers too.
        raise FormatError(
            f"password-protected, or an old binary Office file renamed to .{kind}; save it again as .{kind}"
        )
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            unzipped = sum(info.file_size for info in archive.infolist())
    except zipfile.BadZipFile as exc:
        raise FormatError(f"not a valid .{kind} file (not a zip archive)") from exc
    if unzipped > MAX_UNZIPPED_BYTES:
        raise FormatError(f"too large once unzipped ({unzipped // (1024 * 1024)} MiB)")


def table_sections(cells: list[list[str]], level: int, budget: int = TABLE_BLOCK_CHARS) -> list[str]:
    """A normalized table as Markdown blocks: one table if it is short, otherwise "Rows a–b" sections
    (headers of `level`) that each repeat the header row."""
    blocks = table_blocks(cells, budget)
    if len(blocks) <= 1:
        return [text for _, _, text in blocks]
    out: list[str] = []
    for first, last, text in blocks:
        out.extend([heading(level, f"Rows {first}–{last}"), text])
    return out
