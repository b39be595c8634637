"""Read supported files into plain documents. One function per format; unknown formats are skipped.

Markdown and plain text are read as they are; HTML, PDF, Office files and images of pages are converted
to Markdown by crag.ingest.formats, so that every document reaches the chunker with the same kind of
headers. Scanned PDF pages and images are read by the OCR engine the caller passes (crag/ingest/ocr).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from crag.ingest.formats import csv_file, excel, html_file, image_file, pdf_file, plain_text, powerpoint, word
from crag.ingest.formats.common import Converted, FormatError
from crag.ingest.ocr.scans import OcrContext, ScanReport

_TEXT_SUFFIXES = {".md", ".markdown", ".txt"}
Converter = Callable[[bytes, str, OcrContext], Converted]  # (bytes, file name stem, OCR) → Markdown
# suffix → (name used in messages, converter)
_CONVERTERS: dict[str, tuple[str, Converter]] = {
    ".html": ("HTML", lambda data, _name, _ocr: html_file.convert(data)),
    ".htm": ("HTML", lambda data, _name, _ocr: html_file.convert(data)),
    ".pdf": ("PDF", lambda data, _name, ocr: pdf_file.convert(data, ocr)),
    ".docx": ("Word", lambda data, _name, _ocr: word.convert(data)),
    ".pptx": ("PowerPoint", lambda data, _name, _ocr: powerpoint.convert(data)),
    ".xlsx": ("Excel", lambda data, _name, _ocr: excel.convert(data)),
    ".csv": ("CSV", lambda data, name, _ocr: csv_file.convert(data, name)),
    **{
        suffix: ("image", lambda data, _name, ocr: image_file.convert(data, ocr))
        for suffix in image_file.SUFFIXES
    },
}
SUPPORTED_SUFFIXES = _TEXT_SUFFIXES | set(_CONVERTERS)


class DocumentError(Exception):
    """A file that cannot be read as a document; the message is safe to show."""

    def __init__(self, message: str, scan: ScanReport | None = None) -> None:
        super().__init__(message)
        self.scan = scan  # a scanned file left unread: what OCR did (its pages count as skipped)


@dataclass(frozen=True)
class Document:
    file: str  # relative path with forward slashes
    title: str
    text: str  # Markdown (plain text is kept as-is: it has no headers)
    markdown: bool
    # Principals that may read it (crag/core/access.py); None: unknown (a folder without access rules).
    allowed: tuple[str, ...] | None = None
    scan: ScanReport | None = None  # it had scanned pages: what OCR did with them


def discover(docs_dir: Path, skipped: list[str] | None = None) -> list[Path]:
    """Supported files under docs_dir, in a stable order: those `is_indexable` accepts.

    The walk never follows a symbolic link, neither to a file nor into a directory: a link may point
    anywhere (a link to /etc/passwd once had its contents quoted in an answer). Each link met is
    named in `skipped`, when given, so that the build report says why it was left out. Hidden files
    and folders are passed over silently, as before, and hidden folders are not even entered.
    """
    files: list[Path] = []
    pending = [docs_dir]
    while pending:
        folder = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            if skipped is not None and folder != docs_dir:
                skipped.append(f"{_rel(Path(folder), docs_dir)}: cannot be listed ({exc.strerror})")
            continue
        for entry in entries:
            path = Path(entry.path)
            if entry.name.startswith("."):
                continue
            if entry.is_symlink():
                if skipped is not None:
                    skipped.append(f"{_rel(path, docs_dir)}: {SYMLINK_REASON}")
                continue
            if entry.is_dir(follow_symlinks=False):
                pending.append(path)
            elif is_indexable(path, docs_dir):
                files.append(path)
    return sorted(files, key=lambda p: _rel(p, docs_dir))


SYMLINK_REASON = "a symbolic link, not followed (links are never indexed or served)"


def is_indexable(path: Path, docs_dir: Path) -> bool:
    """Whether `path` is a document the bot may index and serve: a regular file of a supported
    format under `docs_dir`, reached without passing through a symbolic link, a hidden file or
    folder, or a `..`, and not an Office lock file.

    `path` is judged as written (docs_dir / the relative path), never resolved: resolving would
    follow the very links this refuses. docs_dir itself may be a link (a deployment's choice).
    """
    try:
        parts = path.relative_to(docs_dir).parts
    except ValueError:
        return False
    if not parts or any(part in (".", "..") or part.startswith(".") for part in parts):
        return False
    if path.name.startswith("~$") or path.suffix.lower() not in SUPPORTED_SUFFIXES:
        return False  # ~$ is Office's lock file beside a document that is open
    current = docs_dir
    try:
        for part in parts[:-1]:
            current = current / part
            if not stat.S_ISDIR(os.lstat(current).st_mode):
                return False  # a link to a folder, or not a folder at all
        return stat.S_ISREG(os.lstat(path).st_mode)  # lstat: a link is not a regular file
    except OSError:
        return False


def _rel(path: Path, docs_dir: Path) -> str:
    return path.relative_to(docs_dir).as_posix()


def load(path: Path, docs_dir: Path, ocr: OcrContext | None = None) -> Document:
    """The document at path; scanned pages are read with ocr's engine (none: they are skipped)."""
    rel = path.relative_to(docs_dir).as_posix()
    if _through_link(path, docs_dir):
        raise DocumentError(f"{rel}: {SYMLINK_REASON}")
    try:
        raw = _read_no_follow(path)
    except OSError as exc:
        raise DocumentError(f"{rel}: cannot be read ({exc.strerror or exc.__class__.__name__})") from exc
    return from_bytes(raw, rel, ocr)


def is_supported(name: str) -> bool:
    """Whether a file of this name is of a format the loaders read (not an Office lock file)."""
    return not name.startswith("~$") and Path(name).suffix.lower() in SUPPORTED_SUFFIXES


def from_bytes(raw: bytes, rel: str, ocr: OcrContext | None = None) -> Document:
    """The document in a file's bytes, by the format its name says: what `load` does once the file
    is read, for sources that are not a folder (a SharePoint library's downloads). Scanned pages are
    read with ocr's engine (none: they are skipped)."""
    name = PurePosixPath(rel)
    suffix = name.suffix.lower()
    if suffix in _CONVERTERS:
        return _convert(raw, rel, name.stem, *_CONVERTERS[suffix], ocr or OcrContext())
    if suffix not in _TEXT_SUFFIXES:
        raise DocumentError(f"{rel}: not a supported format")
    text = _decode(raw, rel)
    if not text.strip():
        raise DocumentError(f"{rel}: the file is empty")
    if suffix in {".md", ".markdown"}:
        return Document(file=rel, title=_markdown_title(text) or name.stem, text=text, markdown=True)
    # Plain text whose layout shows headings (underlined) or aligned tables is read as that structure.
    text, structured = plain_text.structured(text)
    title = (_markdown_title(text) if structured else "") or _first_line(text) or name.stem
    return Document(file=rel, title=title, text=text, markdown=structured)


def _through_link(path: Path, docs_dir: Path) -> bool:
    current = docs_dir
    for part in path.relative_to(docs_dir).parts:
        current = current / part
        if current.is_symlink():
            return True
    return False


def _read_no_follow(path: Path) -> bytes:
    # O_NOFOLLOW: a file swapped for a link between discovery and reading is refused, not followed.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _convert(raw: bytes, rel: str, stem: str, kind: str, converter: Converter, ocr: OcrContext) -> Document:
    if not raw.strip():
        raise DocumentError(f"{rel}: the file is empty")
    try:
        converted = converter(raw, stem, ocr)
    except FormatError as exc:
        raise DocumentError(f"{rel}: {_one_line(str(exc))}", exc.scan) from exc
    except Exception as exc:
        # Parsers of zip, XML and PDF raise a zoo of exception types on damaged input (BadZipFile,
        # KeyError, XMLSyntaxError, PdfReadError, ValueError, struct.error, ...); none of them may stop
        # an index build, and each must say which file was at fault.
        detail = _one_line(str(exc))[:160]
        reason = f"{exc.__class__.__name__}: {detail}" if detail else exc.__class__.__name__
        raise DocumentError(f"{rel}: not a readable {kind} file ({reason})") from exc
    if not converted.text.strip():
        raise DocumentError(f"{rel}: no text found")
    return Document(
        file=rel, title=converted.title or stem, text=converted.text, markdown=True, scan=converted.scan
    )


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
