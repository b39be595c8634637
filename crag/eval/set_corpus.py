"""An evaluation set's corpus as its questions are checked against it: each document's text (where a
gold answer must stand verbatim), its sections (heading -> the lines up to the next heading of any
level, where the answer must stand inside gold_section) and its language.

Headings are read as the sets were written: Markdown `#` lines, HTML <h1>..<h6>, Word heading and
title styles, and in plain text either underlined lines or 【label】 / "Label. " lead-ins (the set's
rules say which). This is not how crag/ingest reads documents for the index: the checker holds the
questions to the files as written, not to what the engine makes of them.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import docx
from docx.table import Table

# One line of a document: the heading it opens (None for a body line) and what it adds to the
# section it is in.
Line = tuple[str | None, str]

_MD_HEADING = re.compile(r"^#{1,6}\s+(.*)$")
_UNDERLINE = re.compile(r"[=\-―─]{3,}")
_LEAD_INS = (re.compile(r"^【([^】]+)】(.*)$"), re.compile(r"^([A-Z][A-Za-z ,&-]{2,40})\. (.*)$"))
_TAG = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class Document:
    text: str
    sections: dict[str, str]
    lang: str


def read_document(path: Path, txt_headings: str) -> Document:
    """The document at `path` (.md, .txt, .html or .docx); raises OSError or ValueError when it
    cannot be read (a .docx that is not one, text that is not UTF-8)."""
    reader = _READERS.get(path.suffix)
    if reader is None:
        raise ValueError(f"no reader for {path.suffix or 'a file without a suffix'} files")
    text, lines = reader(path, txt_headings)
    return Document(text=text, sections=_sections(lines), lang=lang_of(text))


def lang_of(text: str) -> str:
    """ja when Japanese characters are more than half as many as Latin letters, else en."""
    jp = len(re.findall(r"[\u3040-\u30ff\u4e00-\u9fff]", text))
    latin = len(re.findall(r"[A-Za-z]", text))
    return "ja" if jp > latin * 0.5 else "en"


def _sections(lines: list[Line]) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    current = None
    for heading, rest in lines:
        if heading is not None:
            current = heading
            out.setdefault(current, [])
        if current is not None and rest:
            out[current].append(rest)
    return {k: "\n".join(v) for k, v in out.items()}


def _markdown(path: Path, _txt_headings: str) -> tuple[str, list[Line]]:
    text = path.read_text("utf-8")
    lines: list[Line] = []
    for line in text.splitlines():
        m = _MD_HEADING.match(line)
        lines.append((m.group(1).strip(), "") if m else (None, line))
    return text, lines


def _plain(path: Path, txt_headings: str) -> tuple[str, list[Line]]:
    text = path.read_text("utf-8")
    raw = text.splitlines()
    lines: list[Line] = []
    for i, line in enumerate(raw):
        if txt_headings == "underlined":
            below = raw[i + 1].strip() if i + 1 < len(raw) else ""
            underlined = line.strip() and _UNDERLINE.fullmatch(below or "x")
            lines.append((line.strip(), "") if underlined else (None, line))
            continue
        m = _LEAD_INS[0].match(line) or _LEAD_INS[1].match(line)
        lines.append((m.group(1).strip(), m.group(2)) if m else (None, line))
    return text, lines


def _html(path: Path, _txt_headings: str) -> tuple[str, list[Line]]:
    mark = "\x00H"  # stands before a heading's text until the page is split into lines
    raw = re.sub(r"(?is)<(script|style|head)\b.*?</\1>", " ", path.read_text("utf-8"))
    raw = re.sub(
        r"(?is)<h[1-6][^>]*>(.*?)</h[1-6]>", lambda m: f"\n{mark}{_TAG.sub('', m.group(1)).strip()}\n", raw
    )
    lines: list[Line] = []
    for line in map(html.unescape, _TAG.sub(" ", raw).splitlines()):
        lines.append((line.removeprefix(mark), "") if line.startswith(mark) else (None, line))
    return _joined(lines), lines


def _word(path: Path, _txt_headings: str) -> tuple[str, list[Line]]:
    try:
        document = docx.Document(str(path))
    except Exception as exc:  # python-docx raises zip, XML and its own errors for a file that is not one
        raise ValueError(f"not a Word document ({exc})") from exc
    lines: list[Line] = []
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            lines += [(None, cell.text) for row in block.rows for cell in row.cells]
            continue
        style = (block.style.name if block.style is not None else "") or ""
        heading = style.lower().startswith(("heading", "title"))
        lines.append((block.text.strip(), "") if heading else (None, block.text))
    return _joined(lines), lines


def _joined(lines: list[Line]) -> str:
    """The text of a converted document: its lines, headings included, one a line."""
    return "\n".join(rest if heading is None else heading for heading, rest in lines)


_READERS: dict[str, Callable[[Path, str], tuple[str, list[Line]]]] = {
    ".md": _markdown,
    ".txt": _plain,
    ".html": _html,
    ".docx": _word,
}
