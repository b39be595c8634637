"""Document Intelligence's Markdown, made like the rest of the index's: its HTML tables become pipe
tables (cut into blocks that repeat the header row, as the Office converters do), its page markers
(<!-- PageBreak -->, page numbers, headers and footers) are dropped, and figures keep only their text.
Its headings stay: they are the structure the chunker splits on."""

from __future__ import annotations

import re

from bs4 import BeautifulSoup

from crag.ingest.formats.common import inline, normalize_rows, table_blocks
from crag.ingest.formats.html_file import table_rows

_COMMENT = re.compile(r"<!--.*?-->", re.S)
_TABLE = re.compile(r"<table\b.*?</table\s*>", re.S | re.I)
_FIGURE_TAG = re.compile(r"</?(figure|figcaption)\b[^>]*>", re.I)
_SELECTION = {":selected:": "☑", ":unselected:": "☐"}
_TITLE = re.compile(r"^# +(.+?)\s*#*\s*$", re.M)


def normalize(content: str) -> tuple[str, str]:
    """(title: the first # heading or "", Markdown)."""
    text = _COMMENT.sub("", content.replace("\r\n", "\n"))
    text = _TABLE.sub(lambda match: f"\n\n{_pipe_table(match.group(0))}\n\n", text)
    text = _FIGURE_TAG.sub("\n", text)
    for mark, box in _SELECTION.items():
        text = text.replace(mark, box)
    lines = [line.rstrip() for line in text.split("\n")]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    title = _TITLE.search(text)
    return (inline(title.group(1)) if title else ""), (text + "\n" if text else "")


def _pipe_table(html: str) -> str:
    table = BeautifulSoup(html, "html.parser").find("table")
    if table is None:
        return ""
    caption = table.find("caption")
    title = inline(caption.get_text()) if caption is not None else ""
    if caption is not None:
        caption.decompose()
    blocks = [text for _, _, text in table_blocks(normalize_rows(table_rows(table)))]
    return "\n\n".join([title, *blocks] if title else blocks)
