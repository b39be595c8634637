"""PDF → Markdown with pypdf: the text of each page, under the PDF's own bookmarks when it has any.

PDF text carries no headers, so structure comes from the outline (bookmarks) when the file has one:
its top two levels become ## / ### headers placed before the page where each entry starts. Without an
outline, each page becomes a "## Page N" section, which keeps long documents in page-sized chunks and
lets a citation say where to look.

Pages without a text layer that show something (scans) are read by OCR (crag/ingest/ocr): a page
engine's text takes the page's place, the text pages keep their own; an engine that reads whole
documents (Document Intelligence) gets the whole file and its Markdown replaces pypdf's.
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterable
from typing import Any

from pypdf import PasswordType, PdfReader
from pypdf.errors import DependencyError
from pypdf.generic import Destination

from crag.ingest.formats.common import (
    Converted,
    FormatError,
    assemble,
    body_lines,
    heading,
    inline,
    property_title,
)
from crag.ingest.ocr.ocr_engine import ScannedFile
from crag.ingest.ocr.pages import inked_pdf_pages
from crag.ingest.ocr.scans import OcrContext, read_scans

# pypdf logs a warning for every irregularity it repairs ("EOF marker not found", "wrong pointing
# object"); files it cannot read raise instead, and the loader reports those once, by name.
logging.getLogger("pypdf").setLevel(logging.ERROR)

_OUTLINE_DEPTH = 2  # bookmark levels turned into headers (## and ###); deeper ones stay in the text
# A page with fewer characters than this in its text layer has none to speak of: a scan, perhaps
# with a page number stamped on it digitally. OCR reads it whole, the stamp included.
_TEXT_LAYER_CHARS = 5


def convert(data: bytes, ocr: OcrContext | None = None) -> Converted:
    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        # Many PDFs are encrypted only to restrict printing or copying: they open with an empty password.
        try:
            opened = reader.decrypt("")
        except DependencyError as exc:
            raise FormatError("encrypted with a cipher that needs the 'cryptography' package") from exc
        if opened == PasswordType.NOT_DECRYPTED:
            raise FormatError("password-protected PDF")
    pages = [_page_text(reader, i) for i in range(len(reader.pages))]
    metadata_title = _metadata_title(reader)
    untexted = [i for i, text in enumerate(pages) if len("".join(text.split())) < _TEXT_LAYER_CHARS]
    scanned = inked_pdf_pages(data, untexted)
    scan = None
    if scanned:
        outcome = read_scans(ocr or OcrContext(), ScannedFile(data, "pdf", tuple(scanned), len(pages)))
        scan = outcome.report
        if outcome.document:
            title = metadata_title or outcome.title
            return Converted(title=title, text=assemble(title, [outcome.document]), scan=scan)
        for index, text in outcome.pages.items():
            pages[index] = "\n".join(body_lines(text)).strip()
        if not any(pages):
            raise FormatError(
                f"a scanned PDF ({len(scanned)} page(s) without a text layer) that was not read: "
                f"{scan.reason or 'OCR found no text'}",
                scan,
            )
    if not any(pages):
        raise FormatError("no text found (its pages are blank)")

    starts = _outline_starts(reader)
    blocks: list[str] = []
    for number, text in enumerate(pages, start=1):
        if starts:
            blocks.extend(_place_headings(text, starts.get(number - 1, [])))
            continue
        if len(pages) > 1:
            blocks.append(heading(2, f"Page {number}"))
        if text:
            blocks.append(text)
    # A title taken from the first line is already in the text: it gets no "# " header of its own.
    return Converted(
        title=metadata_title or _first_line(pages), text=assemble(metadata_title, blocks), scan=scan
    )


def _page_text(reader: PdfReader, index: int) -> str:
    raw = reader.pages[index].extract_text() or ""
    lines = body_lines(raw.replace("\x00", ""))
    # Runs of blank lines (layout gaps) become one paragraph break.
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _place_headings(text: str, entries: list[tuple[int, str]]) -> list[str]:
    """The page's text with its bookmarks as headers: at the line that reads like the bookmark (that
    line is the heading as printed, so it is replaced), else where the text found so far ends."""
    lines = text.split("\n") if text else []
    blocks: list[str] = []
    cursor = 0
    for level, name in entries:
        key = _key(name)
        found = next((i for i in range(cursor, len(lines)) if _key(lines[i]) == key), None)
        end = cursor if found is None else found
        before = "\n".join(lines[cursor:end]).strip()
        if before:
            blocks.append(before)
        blocks.append(heading(level, name))
        cursor = end if found is None else found + 1
    rest = "\n".join(lines[cursor:]).strip()
    if rest:
        blocks.append(rest)
    return blocks


def _key(line: str) -> str:
    return inline(line.lstrip("\\")).casefold()


def _metadata_title(reader: PdfReader) -> str:
    metadata = reader.metadata
    return property_title(metadata.title) if metadata is not None else ""


def _first_line(pages: list[str]) -> str:
    for page in pages:
        for line in page.split("\n"):
            if line.strip():
                return inline(line.lstrip("\\"))[:120]
    return ""


def _outline_starts(reader: PdfReader) -> dict[int, list[tuple[int, str]]]:
    """Page index → (header level, bookmark title) of the bookmarks that start on that page."""
    starts: dict[int, list[tuple[int, str]]] = {}
    for depth, item in _walk(reader.outline, 0):
        if depth >= _OUTLINE_DEPTH:
            continue
        name = inline(str(item.title or ""))
        page = reader.get_destination_page_number(item)
        if name and page is not None and page >= 0:
            starts.setdefault(page, []).append((depth + 2, name))
    return starts


def _walk(items: Iterable[Any], depth: int) -> Iterable[tuple[int, Destination]]:
    # pypdf's outline is a list of bookmarks where a nested list holds the children of the one before it.
    for item in items:
        if isinstance(item, list):
            yield from _walk(item, depth + 1)
        elif isinstance(item, Destination):
            yield depth, item
