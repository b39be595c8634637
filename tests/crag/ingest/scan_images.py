"""Scanned pages made here: text drawn by Pillow with an installed Japanese font (Debian
fonts-ipafont-gothic, which .ci/run installs), saved as an image or as a PDF with no text layer."""

from __future__ import annotations

import io
import shutil
import subprocess
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from fpdf import FPDF
from PIL import Image, ImageDraw, ImageFont

from tests.servers.harness import unavailable

A4_300DPI = (2480, 3508)


@cache
def _japanese_font_path() -> str:
    """The IPA Gothic font file, as fontconfig lists it ("" when there is none)."""
    if shutil.which("fc-list") is None:
        return ""
    listed = subprocess.run(["fc-list", ":lang=ja", "file"], capture_output=True, text=True, timeout=30)
    paths = sorted(line.split(":")[0].strip() for line in listed.stdout.splitlines() if line.strip())
    gothic = [p for p in paths if p.endswith("ipag.ttf")]
    return (gothic or paths or [""])[0]


def japanese_font() -> str:
    path = _japanese_font_path()
    if not path:
        unavailable("no Japanese font to draw test pages with (Debian: apt-get install fonts-ipafont-gothic)")
    return path


def page_image(lines: Sequence[str], size: tuple[int, int] = A4_300DPI, font_px: int = 48) -> Image.Image:
    """A white page with the lines printed in black from the top left, as a 300 dpi scan shows 12 pt."""
    image = Image.new("L", size, 255)
    draw = ImageDraw.Draw(image)
    font = ImageFont.truetype(japanese_font(), font_px)
    for number, line in enumerate(lines):
        draw.text((200, 300 + number * int(font_px * 2.2)), line, font=font, fill=0)
    return image


def png_bytes(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def image_only_pdf(pages: Sequence[Image.Image], path: Path) -> Path:
    """A PDF whose pages are only these images: no text layer at all, as a scanner writes it."""
    first, *rest = pages
    first.save(path, "PDF", resolution=300, save_all=True, append_images=list(rest))
    return path


def mixed_pdf(text: str, scanned: Image.Image, path: Path) -> Path:
    """Page 1: real text; page 2: a scanned page (an image); page 3: blank."""
    pdf = FPDF()
    pdf.add_font("ipag", fname=japanese_font())
    pdf.set_font("ipag", size=14)
    pdf.add_page()
    pdf.multi_cell(0, 10, text)
    pdf.add_page()
    pdf.image(scanned, x=0, y=0, w=210)
    pdf.add_page()
    pdf.output(str(path))
    return path
