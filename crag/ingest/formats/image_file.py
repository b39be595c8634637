"""Images of pages (.png .jpg .jpeg .tif .tiff) → Markdown through OCR; a multi-page TIFF becomes one
"## Page N" section per page. The title is the file name: a scan names nothing else reliably."""

from __future__ import annotations

from crag.ingest.formats.common import Converted, FormatError, assemble, body_lines, heading
from crag.ingest.ocr.ocr_engine import ScannedFile
from crag.ingest.ocr.pages import image_frames
from crag.ingest.ocr.scans import OcrContext, read_scans

SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff")


def convert(data: bytes, ocr: OcrContext | None = None) -> Converted:
    frames = image_frames(data)  # raises on a file that is no image (the loader names it)
    outcome = read_scans(ocr or OcrContext(), ScannedFile(data, "image", tuple(range(frames)), frames))
    scan = outcome.report
    if outcome.document:
        return Converted(title=outcome.title, text=assemble(outcome.title, [outcome.document]), scan=scan)
    texts = ["\n".join(body_lines(outcome.pages.get(i, ""))).strip() for i in range(frames)]
    if not any(texts):
        if scan.read < scan.scanned:
            raise FormatError(f"an image that was not read: {scan.reason}", scan)
        raise FormatError("no text found in the image (OCR read nothing)", scan)
    blocks: list[str] = []
    for number, text in enumerate(texts, start=1):
        if frames > 1:
            blocks.append(heading(2, f"Page {number}"))
        if text:
            blocks.append(text)
    return Converted(title="", text=assemble("", blocks), scan=scan)
