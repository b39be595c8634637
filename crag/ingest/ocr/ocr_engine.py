"""The OCR protocol: what the format converters hand an engine, and what they get back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

# Told after each scanned page is read: (pages read so far, scanned pages in the file).
PageProgress = Callable[[int, int], None]


@dataclass(frozen=True)
class ScannedFile:
    """A file with pages that hold no text layer."""

    data: bytes
    kind: Literal["pdf", "image"]
    pages: tuple[int, ...]  # 0-based: the PDF's pages without a text layer, or every frame of an image
    page_count: int  # pages (or frames) in the whole file


@dataclass(frozen=True)
class OcrResult:
    """Either the text of the scanned pages (an engine that reads page images), or the whole file as
    Markdown (an engine that reads whole documents: its text replaces the converter's)."""

    pages: dict[int, str] = field(default_factory=dict)  # page index -> text read
    document: str = ""  # the whole file as Markdown
    title: str = ""  # the document's title as the engine found it (its first # heading), or ""
    failures: dict[int, str] = field(default_factory=dict)  # page index -> why it could not be read


class OcrUnavailable(Exception):
    """No engine can read scanned pages here; the message says how to get one (safe to show)."""


class OcrFailed(Exception):
    """The engine failed on this file (a service error, a timeout): a one-line reason, safe to show.
    With `retry`, the failure may pass (an outage, a key being fixed): the file is read again at the
    next build."""

    def __init__(self, message: str, retry: bool = True) -> None:
        super().__init__(message)
        self.retry = retry


class OcrEngine(Protocol):
    @property
    def name(self) -> str:
        """Which engine and languages or model: recorded with the index, so that a different engine
        reads the scanned files again."""
        ...

    def read(self, file: ScannedFile, progress: PageProgress | None = None) -> OcrResult:
        """The text of file's scanned pages (or the whole file). Blocking and slow (seconds a page):
        called from the index build, which runs off the event loop. Raises OcrUnavailable or OcrFailed."""
        ...
