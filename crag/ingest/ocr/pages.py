"""Scanned pages as images: PDF pages rendered with PDFium (pypdfium2, a self-contained wheel), image
files' frames with Pillow; and whether a page has anything on it to read."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator, Sequence

import pypdfium2 as pdfium
from PIL import Image, ImageOps, ImageSequence

# PDFium is not thread-safe and builds of different folders may run in parallel threads: one call
# into it at a time. Rendering is short beside OCR, so the lock costs little.
_PDFIUM = threading.Lock()

_CHECK_DPI = 36  # enough to tell a blank page from one with print on it, fast
# A page shows something when a few of its pixels at that resolution are darker than light grey: one
# short word in 10 pt does that; a speck of dust averages out. Erring towards "inked" costs one OCR
# call on a blank scan (which reads nothing); the other way would lose a page.
_INK_LEVEL = 224
_INK_PIXELS = 3


def render_pdf_pages(data: bytes, pages: Sequence[int], dpi: int) -> Iterator[tuple[int, Image.Image]]:
    """(page index, greyscale image at dpi) for each of pages, one at a time (an A4 page at 300 dpi
    is 8.7 MB: never all at once)."""
    for index in pages:
        with _PDFIUM:
            document = pdfium.PdfDocument(data)
            try:
                image = _render(document, index, dpi)
            finally:
                document.close()
        yield index, image


def inked_pdf_pages(data: bytes, candidates: Sequence[int]) -> list[int]:
    """Those of candidates (pages without a text layer) that show something: a scan, a drawing, text
    turned into outlines. Blank pages (a separator, the back of a sheet) are not scanned pages."""
    if not candidates:
        return []
    with _PDFIUM:
        document = pdfium.PdfDocument(data)
        try:
            return [i for i in candidates if has_ink(_render(document, i, _CHECK_DPI))]
        finally:
            document.close()


def _render(document: pdfium.PdfDocument, index: int, dpi: int) -> Image.Image:
    page = document[index]
    try:
        bitmap = page.render(scale=dpi / 72, grayscale=True)
        try:
            # to_pil shares the bitmap's memory, which close() frees: keep a copy.
            image: Image.Image = bitmap.to_pil().copy()
            return image
        finally:
            bitmap.close()
    finally:
        page.close()


def has_ink(image: Image.Image) -> bool:
    return sum(image.convert("L").histogram()[:_INK_LEVEL]) >= _INK_PIXELS


def image_frames(data: bytes) -> int:
    """Frames (pages) in an image file: several in a multi-page TIFF (a fax, a scanner's batch)."""
    with Image.open(io.BytesIO(data)) as image:
        return int(getattr(image, "n_frames", 1))


def image_pages(data: bytes, pages: Sequence[int]) -> Iterator[tuple[int, Image.Image]]:
    """(frame index, greyscale image) of an image file, upright as its EXIF orientation says (a photo
    of a page taken with a phone)."""
    wanted = set(pages)
    with Image.open(io.BytesIO(data)) as image:
        for index, frame in enumerate(ImageSequence.Iterator(image)):
            if index in wanted:
                yield index, (ImageOps.exif_transpose(frame) or frame).convert("L")
