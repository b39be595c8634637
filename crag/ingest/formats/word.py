"""Word (.docx) → Markdown with python-docx: body paragraphs and tables in document order.

Structure comes from paragraph styles: Title → the document title, Heading 1-3 → # / ## / ###
(deeper headings stay in the text), list paragraphs → "- " items; tables keep their place in the
body as Markdown tables. Headers, footers, comments and text boxes are not read.
"""

from __future__ import annotations

import io
import re

import docx
from docx.table import Table
from docx.text.paragraph import Paragraph

from crag.ingest.formats.common import (
    Converted,
    FormatError,
    assemble,
    check_office_zip,
    inline,
    paragraph,
    property_title,
    table,
)

# English names, and the ones Japanese Word writes when a document defines its own localized styles.
_HEADING = re.compile(r"^(?:heading|見出し)\s*(\d)$", re.IGNORECASE)
_TITLE_STYLES = {"title", "表題", "タイトル"}


def convert(data: bytes) -> Converted:
    check_office_zip(data, "docx")
    document = docx.Document(io.BytesIO(data))
    title = ""
    blocks: list[str] = []
    for item in document.iter_inner_content():
        if isinstance(item, Table):
            rendered = table([c.text for c in row.cells] for row in item.rows)
            if rendered:
                blocks.append(rendered)
            continue
        text = item.text
        if not text.strip():
            continue
        style = _style_name(item)
        level = _heading_level(style)
        if style in _TITLE_STYLES:
            if not title:
                title = inline(text)
                blocks.append("# " + title)
            else:
                blocks.append(paragraph(text))
        elif level:
            blocks.append("#" * level + " " + inline(text))
        elif _is_list_item(item, style):
            blocks.append("  " * _list_level(item) + "- " + inline(text))
        else:
            blocks.append(paragraph(text))
    if not blocks:
        raise FormatError("no text found in the document")
    title = title or property_title(document.core_properties.title)
    return Converted(title=title, text=assemble(title, _join_lists(blocks)))


def _style_name(item: Paragraph) -> str:
    style = item.style
    return (style.name or "").strip().lower() if style is not None else ""


def _heading_level(style: str) -> int:
    match = _HEADING.match(style)
    return int(match.group(1)) if match and 1 <= int(match.group(1)) <= 6 else 0


def _is_list_item(item: Paragraph, style: str) -> bool:
    return style.startswith(("list", "リスト", "箇条書き", "段落番号")) or bool(_numbering(item, ""))


def _list_level(item: Paragraph) -> int:
    levels = _numbering(item, "/w:ilvl/@w:val")
    return min(int(levels[0]), 8) if levels and levels[0].isdigit() else 0


def _numbering(item: Paragraph, below: str) -> list[str]:
    # A paragraph is numbered (bulleted) by its w:numPr, which python-docx does not expose publicly.
    return [str(x) for x in item._p.xpath("./w:pPr/w:numPr" + below)]


def _join_lists(blocks: list[str]) -> list[str]:
    """Consecutive list items form one Markdown list (one block, no blank lines between items)."""
    out: list[str] = []
    for block in blocks:
        if out and _item(block) and _item(out[-1].rsplit("\n", 1)[-1]):
            out[-1] += "\n" + block
        else:
            out.append(block)
    return out


def _item(line: str) -> bool:
    return line.lstrip(" ").startswith("- ")
