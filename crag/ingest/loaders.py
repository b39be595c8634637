"""Read supported files into plain documents. One function per format; unknown formats are skipped."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SUPPORTED_SUFFIXES = {".md", ".markdown", ".txt"}


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
    ]
    return sorted(files, key=lambda p: p.relative_to(docs_dir).as_posix())


def load(path: Path, docs_dir: Path) -> Document:
    rel = path.relative_to(docs_dir).as_posix()
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DocumentError(f"{rel}: cannot be read ({exc.strerror or exc.__class__.__name__})") from exc
    text = _decode(raw, rel)
    if not text.strip():
        raise DocumentError(f"{rel}: the file is empty")
    if path.suffix.lower() in {".md", ".markdown"}:
        return Document(file=rel, title=_markdown_title(text) or path.stem, text=text, markdown=True)
    return Document(file=rel, title=_first_line(text) or path.stem, text=text, markdown=False)


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
