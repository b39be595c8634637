"""Which OCR engine reads scanned pages and images, from the settings."""

from __future__ import annotations

from crag.config.engine_settings import CragSettings
from crag.ingest.ocr.document_intelligence import document_intelligence_engine
from crag.ingest.ocr.ocr_engine import OcrEngine
from crag.ingest.ocr.tesseract import tesseract_engine
from crag.ingest.ocr.unavailable import NoOcr


def ocr_engine(settings: CragSettings) -> OcrEngine:
    """CRAG_OCR's engine for scanned pages and images; auto: Azure AI Document Intelligence when its
    endpoint and key are set, else Tesseract when installed, else none (those pages are skipped with
    the reason). Built per index build: Tesseract installed while the bot runs is used from the next."""
    ocr = settings.ocr
    if ocr.engine == "off":
        return NoOcr("OCR is off (CRAG_OCR=off)")
    if ocr.engine == "azure" or (ocr.engine == "auto" and ocr.azure_configured):
        return document_intelligence_engine(ocr)  # the settings refuse CRAG_OCR=azure without them
    return tesseract_engine(ocr)
