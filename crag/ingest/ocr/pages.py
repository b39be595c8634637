"""Scanned pages as images: PDF pages rendered with PDFium (pypdfium2, a self-contained wheel), image
files' frames with Pillow; and whether a page has anything on it to read."""

from __future__ import annotations

import io
import math
import threading
from collections.abc import Sequence

import pypdfium2 as pdfium
from PIL import Image, ImageOps

# PDFium is not thread-safe and builds of different folders may run in parallel threads: one call
# into it at a time. Rendering is short beside OCR, so the lock costs little.
_PDFIUM = threading.Lock()

_CHECK_DPI = 36  # enough to tell a blank page from one with print on it, fast
# A page shows something when a few of its pixels at that resolution are darker than light grey: one
# short word in 10 pt does that; a speck of dust averages out. Erring towards "inked" costs one OCR
# call on a blank scan (which reads nothing); the other way would lose a page.
_INK_LEVEL = 224
_INK_PIXELS = 3
# A page larger than this many pixels at the asked resolution (an A0 drawing at 300 dpi is 140 M) is
# rendered smaller: memory stays bounded, and Tesseract refuses images over 32767 pixels a side.
_MAX_PIXELS = 40_000_000


def pdf_page_image(data: bytes, index: int, dpi: int) -> Image.Image:
    """One page as a greyscale image at dpi (one at a time: an A4 page at 300 dpi is 8.7 MB).
    Raises pdfium.PdfiumError when PDFium cannot open the file or the page."""
    with _PDFIUM:
        document = pdfium.PdfDocument(data)
        try:
            return _render(document, index, dpi)
        finally:
            document.close()


def inked_pdf_pages(data: bytes, candidates: Sequence[int]) -> list[int]:
    """Those of candidates (pages without a text layer) that show something: a scan, a drawing, text
    turned into outlines. Blank pages (a separator, the back of a sheet) are not scanned pages. When
    PDFium cannot open the file, every candidate is taken for a scan (reading it will say why not)."""
    if not candidates:
        return []
    with _PDFIUM:
        try:
            document = pdfium.PdfDocument(data)
        except pdfium.PdfiumError:
            return list(candidates)
        try:
            return [i for i in candidates if has_ink(_render(document, i, _CHECK_DPI))]
        finally:
            document.close()


def _render(document: pdfium.PdfDocument, index: int, dpi: int) -> Image.Image:
    page = document[index]
    try:
        width, height = page.get_size()  # in points (1/72 inch)
        scale = min(dpi / 72, math.sqrt(_MAX_PIXELS / max(1.0, width * height)))
        bitmap = page.render(scale=scale, grayscale=True)
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


def image_page(data: bytes, index: int) -> Image.Image:
    """One frame of an image file in greyscale, upright as its EXIF orientation says (a photo of a
    page taken with a phone)."""
    with Image.open(io.BytesIO(data)) as image:
        image.seek(index)
        return (ImageOps.exif_transpose(image) or image).convert("L")
