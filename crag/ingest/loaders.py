"""Read supported files into plain documents. One function per format; unknown formats are skipped.

Markdown and plain text are read as they are; HTML, PDF and Office files are converted to Markdown by
crag.ingest.formats, so that every document reaches the chunker with the same kind of headers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from crag.ingest.formats import csv_file, excel, html_file, pdf_file, powerpoint, word
from crag.ingest.formats.common import Converted, FormatError

_TEXT_SUFFIXES = {".md", ".markdown", ".txt"}
# suffix → (name used in messages, converter from the file's bytes and name to Markdown)
_CONVERTERS: dict[str, tuple[str, Callable[[bytes, str], Converted]]] = {
    ".html": ("HTML", lambda data, _name: html_file.convert(data)),
    ".htm": ("HTML", lambda data, _name: html_file.convert(data)),
    ".pdf": ("PDF", lambda data, _name: pdf_file.convert(data)),
    ".docx": ("Word", lambda data, _name: word.convert(data)),
    ".pptx": ("PowerPoint", lambda data, _name: powerpoint.convert(data)),
    ".xlsx": ("Excel", lambda data, _name: excel.convert(data)),
    ".csv": ("CSV", csv_file.convert),
}
SUPPORTED_SUFFIXES = _TEXT_SUFFIXES | set(_CONVERTERS)


class DocumentError(Exception):
    """A file that cannot be read as a document; the message is safe to show."""


@dataclass(frozen=True)
class Document:
    file: str  # relative path with forward slashes
    title: str
    text: str  # Markdown (plain text is kept as-is: it has no headers)
    markdown: bool


def discover(docs_dir: Path) -> list[Path]:
    """Supported files under docs_dir, in a stable order; hidden files and folders are ignored."""
    files = [
        p
        for p in docs_dir.rglob("*")
        if p.is_file()
        and p.suffix.lower() in SUPPORTED_SUFFIXES
        and not any(part.startswith(".") for part in p.relative_to(docs_dir).parts)
        and not p.name.startswith("~$")  # Office's lock file beside a document that is open
    ]
    return sorted(files, key=lambda p: p.relative_to(docs_dir).as_posix())


def load(path: Path, docs_dir: Path) -> Document:
    rel = path.relative_to(docs_dir).as_posix()
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DocumentError(f"{rel}: cannot be read ({exc.strerror or exc.__class__.__name__})") from exc
    suffix = path.suffix.lower()
    if suffix in _CONVERTERS:
        return _convert(raw, rel, path.stem, *_CONVERTERS[suffix])
    text = _decode(raw, rel)
    if not text.strip():
        raise DocumentError(f"{rel}: the file is empty")
    if path.suffix.lower() in {".md", ".markdown"}:
        return Document(file=rel, title=_markdown_title(text) or path.stem, text=text, markdown=True)
    return Document(file=rel, title=_first_line(text) or path.stem, text=text, markdown=False)


def _convert(
    raw: bytes, rel: str, stem: str, kind: str, converter: Callable[[bytes, str], Converted]
) -> Document:
    if not raw.strip():
        raise DocumentError(f"{rel}: the file is empty")
    try:
        converted = converter(raw, stem)
    except FormatError as exc:
        raise DocumentError(f"{rel}: {_one_line(str(exc))}") from exc
    except Exception as exc:
        # Parsers of zip, XML and PDF raise a zoo of exception types on damaged input (BadZipFile,
        # KeyError, XMLSyntaxError, PdfReadError, ValueError, struct.error, ...); none of them may stop
        # an index build, and each must say which file was at fault.
        detail = _one_line(str(exc))[:160]
        reason = f"{exc.__class__.__name__}: {detail}" if detail else exc.__class__.__name__
        raise DocumentError(f"{rel}: not a readable {kind} file ({reason})") from exc
    if not converted.text.strip():
        raise DocumentError(f"{rel}: no text found")
    return Document(file=rel, title=converted.title or stem, text=converted.text, markdown=True)


def _one_line(message: str) -> str:
    return re.sub(r"\s+", " ", message).strip()


def _decode(raw: bytes, rel: str) -> str:
    if b"\x00" in raw[:4096] and not raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise DocumentError(f"{rel}: looks like a binary file, not text")
    for encoding in ("utf-8-sig", "utf-16", "cp932"):
        try:
            text = raw.decode(encoding)
        except UnicodeDecodeError:
            continue
        if encoding == "utf-16" and not raw.startswith((b"\xff\xfe", b"\xfe\xff")):
            continue
        return text.replace("\r\n", "\n").replace("\r", "\n")
    raise DocumentError(f"{rel}: not valid UTF-8 or Shift_JIS text")


def _markdown_title(text: str) -> str:
    for line in text.split("\n"):
        if line.startswith("# "):
            return line[2:].strip()
        if line.strip() and not line.startswith("---"):
            break
    return ""


def _first_line(text: str) -> str:
    for line in text.split("\n"):
        if line.strip():
            return line.strip()[:120]
    return ""
