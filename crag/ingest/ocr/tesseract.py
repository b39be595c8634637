"""Tesseract (Debian tesseract-ocr + language packs) through pytesseract: page images to text."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess

import pytesseract
from PIL import Image

from crag.config.ocr import OcrSettings
from crag.ingest.ocr.ocr_engine import OcrEngine, OcrResult, PageProgress, ScannedFile
from crag.ingest.ocr.pages import image_page, pdf_page_image
from crag.ingest.ocr.unavailable import INSTALL_HINT, NoOcr

log = logging.getLogger(__name__)

# Letters of scripts written without spaces between words. Tesseract's Japanese model puts a space
# between many of them ("有 給 休 暇"), which would split every word for the tokenizer.
_CJK = r"\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef々〆ヵヶ"
_SPACE_IN_CJK = re.compile(rf"(?<=[{_CJK}])[^\S\n]+(?=[{_CJK}])")
# preserve_interword_spaces: runs of spaces in the image are kept, not doubled.
_CONFIG = "-c preserve_interword_spaces=1"
# Tesseract's OpenMP threads fight over the cores with everything else on a busy machine: on 2 shared
# cores (load 2.5-4) one thread read a dense A4 page in 4.4-4.9 s, the default threads in 23-24 s.
# The child process inherits the environment; a deployment that sets OMP_THREAD_LIMIT keeps its value.
_OMP_THREADS = "1"


class TesseractOcr:
    def __init__(self, command: str, languages: str, dpi: int, page_timeout: float) -> None:
        self.command = command
        self.languages = languages
        self.dpi = dpi
        self.page_timeout = page_timeout

    @property
    def name(self) -> str:
        return f"tesseract:{self.languages}"

    def read(self, file: ScannedFile, progress: PageProgress | None = None) -> OcrResult:
        texts: dict[int, str] = {}
        failures: dict[int, str] = {}
        for done, index in enumerate(file.pages, start=1):
            try:
                image = self._page(file, index)
            except Exception as exc:  # PDFium's or Pillow's on a damaged page: this page only
                detail = " ".join(str(exc).split())[:120]
                failures[index] = f"the page could not be rendered ({exc.__class__.__name__}: {detail})"
            else:
                try:
                    texts[index] = clean(self._recognize(image))
                except RuntimeError as exc:  # pytesseract's timeout (it kills the process)
                    failures[index] = f"Tesseract took over {self.page_timeout:g}s ({exc})"
                except (pytesseract.TesseractError, OSError) as exc:
                    failures[index] = f"Tesseract failed: {' '.join(str(exc).split())[:160]}"
            if progress:
                progress(done, len(file.pages))
        return OcrResult(pages=texts, failures=failures)

    def _page(self, file: ScannedFile, index: int) -> Image.Image:
        if file.kind == "pdf":
            return pdf_page_image(file.data, index, self.dpi)
        return image_page(file.data, index)

    def _recognize(self, image: Image.Image) -> str:
        # pytesseract reads its command from a module global; every engine in a process is built from
        # the same settings, so setting it here races with no other value.
        pytesseract.pytesseract.tesseract_cmd = self.command
        return str(
            pytesseract.image_to_string(image, lang=self.languages, config=_CONFIG, timeout=self.page_timeout)
        )


def clean(text: str) -> str:
    """OCR output as body text: no spaces between Japanese letters, no form feeds, no runs of blanks."""
    text = _SPACE_IN_CJK.sub("", text.replace("\x0c", "\n"))
    lines = [" ".join(line.split()) for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def tesseract_engine(settings: OcrSettings) -> OcrEngine:
    """Tesseract with the configured languages it has, or the null engine saying what is missing."""
    command = shutil.which(settings.tesseract_cmd)
    if command is None:
        return NoOcr(f"Tesseract is not installed ({INSTALL_HINT})")
    try:
        pytesseract.pytesseract.tesseract_cmd = command
        installed = set(pytesseract.get_languages(config=""))
    except (pytesseract.TesseractError, OSError, subprocess.SubprocessError) as exc:
        return NoOcr(f"Tesseract does not run ({exc.__class__.__name__}; {INSTALL_HINT})")
    wanted = settings.languages.split("+")
    have = [lang for lang in wanted if lang in installed]
    missing = [lang for lang in wanted if lang not in installed]
    if not have:
        return NoOcr(
            f"Tesseract has none of the language packs {'+'.join(wanted)}: install them "
            f"(Debian: apt-get install {_packages(wanted)})"
        )
    if missing:
        log.warning(
            "Tesseract lacks the language pack(s) %s: scanned pages are read in %s only "
            "(Debian: apt-get install %s)",
            "+".join(missing),
            "+".join(have),
            _packages(missing),
        )
    os.environ.setdefault("OMP_THREAD_LIMIT", _OMP_THREADS)
    return TesseractOcr(command, "+".join(have), settings.dpi, settings.page_timeout)


def _packages(languages: list[str]) -> str:
    """Debian's package names of Tesseract language packs (chi_sim -> tesseract-ocr-chi-sim)."""
    return " ".join("tesseract-ocr-" + lang.lower().replace("_", "-") for lang in languages)
