"""The engine in force when no OCR can run: every scanned page is skipped with the reason."""

from __future__ import annotations

from crag.ingest.ocr.ocr_engine import OcrResult, OcrUnavailable, PageProgress, ScannedFile

# How to get an engine, for the reasons scanned pages are skipped.
INSTALL_HINT = (
    "Debian/Ubuntu: apt-get install tesseract-ocr tesseract-ocr-jpn tesseract-ocr-eng; or set "
    "AZURE_DOCUMENT_INTELLIGENCE_ENDPOINT and AZURE_DOCUMENT_INTELLIGENCE_KEY"
)


class NoOcr:
    name = "none"

    def __init__(self, reason: str) -> None:
        self.reason = reason  # why there is no OCR, and how to get it

    def read(self, file: ScannedFile, progress: PageProgress | None = None) -> OcrResult:
        raise OcrUnavailable(self.reason)
