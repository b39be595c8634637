"""The OCR settings (CRAG_OCR_*, AZURE_DOCUMENT_INTELLIGENCE_*): which engine reads scanned pages."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from crag.config.env import EnvSettings
from crag.config.urls import endpoint_url


class OcrSettings(EnvSettings):
    # auto: Azure AI Document Intelligence when its endpoint and key are set, else Tesseract when it is
    # installed, else none (scanned pages and images are skipped, counted and named).
    engine: Literal["auto", "tesseract", "azure", "off"] = Field(default="auto", alias="CRAG_OCR")
    # Tesseract's language packs, in the order it should try them (Debian tesseract-ocr-jpn / -eng).
    languages: str = Field(default="jpn+eng", alias="CRAG_OCR_LANGUAGES")
    # Resolution PDF pages are rendered at for Tesseract: 300 is what its accuracy is tuned for.
    dpi: int = Field(default=300, ge=72, le=600, alias="CRAG_OCR_DPI")
    # Seconds Tesseract may spend on one page before the page is skipped.
    page_timeout: float = Field(default=120.0, gt=0, le=3600, alias="CRAG_OCR_PAGE_TIMEOUT")
    tesseract_cmd: str = Field(default="tesseract", alias="CRAG_TESSERACT_CMD")

    azure_endpoint: str = Field(default="", alias="AZURE_DOCUMENT_INTELLIGENCE_ENDPOINT")
    azure_key: SecretStr = Field(default=SecretStr(""), alias="AZURE_DOCUMENT_INTELLIGENCE_KEY")
    azure_model: str = Field(default="prebuilt-layout", alias="AZURE_DOCUMENT_INTELLIGENCE_MODEL")
    # Seconds one document's analysis may take (upload, the service's work, polling) before the file
    # is skipped; each HTTP request also times out within it.
    azure_timeout: float = Field(default=300.0, gt=0, le=3600, alias="AZURE_DOCUMENT_INTELLIGENCE_TIMEOUT")
    azure_retries: int = Field(default=2, ge=0, le=10, alias="AZURE_DOCUMENT_INTELLIGENCE_RETRIES")

    @field_validator("languages")
    @classmethod
    def _languages_listed(cls, value: str) -> str:
        value = value.strip()
        if not re.fullmatch(r"[A-Za-z_]+(\+[A-Za-z_]+)*", value):
            raise ValueError("CRAG_OCR_LANGUAGES must be Tesseract language codes joined by +, e.g. jpn+eng")
        return value

    @field_validator("azure_endpoint")
    @classmethod
    def _endpoint_is_url(cls, value: str) -> str:
        return endpoint_url(
            value,
            "AZURE_DOCUMENT_INTELLIGENCE_ENDPOINT must be an http(s) URL such as "
            "https://NAME.cognitiveservices.azure.com",
            required=False,
        )

    @model_validator(mode="after")
    def _azure_configured_when_chosen(self) -> OcrSettings:
        if self.engine == "azure" and not self.azure_configured:
            raise ValueError(
                "CRAG_OCR=azure needs AZURE_DOCUMENT_INTELLIGENCE_ENDPOINT and "
                "AZURE_DOCUMENT_INTELLIGENCE_KEY"
            )
        return self

    @property
    def azure_configured(self) -> bool:
        return bool(self.azure_endpoint and self.azure_key.get_secret_value())
