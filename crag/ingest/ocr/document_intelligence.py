"""Azure AI Document Intelligence (prebuilt-layout, Markdown output): whole documents to Markdown,
with their tables and headings, scanned pages and text pages alike."""

from __future__ import annotations

import io
import logging
import time

from azure.ai.documentintelligence import DocumentIntelligenceClient
from azure.ai.documentintelligence.models import DocumentContentFormat
from azure.core.credentials import AzureKeyCredential
from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ServiceRequestError,
    ServiceResponseError,
    ServiceResponseTimeoutError,
)

from crag.config.ocr import OcrSettings
from crag.ingest.ocr.layout_markdown import normalize
from crag.ingest.ocr.ocr_engine import OcrFailed, OcrResult, PageProgress, ScannedFile

log = logging.getLogger(__name__)

_SERVICE = "Azure AI Document Intelligence"
# Seconds between polls of the analysis when the service sends no Retry-After (the SDK's default
# is 30 s, longer than a page usually takes).
_POLL_S = 2.0


class DocumentIntelligenceOcr:
    """Reads through the SDK's synchronous client: the index build that calls it already runs in a
    worker thread, off the event loop, and reads one file after another."""

    def __init__(self, endpoint: str, key: str, model: str, timeout: float, retries: int) -> None:
        self.endpoint = endpoint
        self._key = key
        self.model = model
        self.timeout = timeout  # seconds for one document, from upload to result
        self.retries = retries

    @property
    def name(self) -> str:
        return f"azure-document-intelligence:{self.model}"

    def read(self, file: ScannedFile, progress: PageProgress | None = None) -> OcrResult:
        deadline = time.monotonic() + self.timeout
        client = DocumentIntelligenceClient(
            self.endpoint,
            AzureKeyCredential(self._key),
            retry_total=self.retries,
            connection_timeout=min(10.0, self.timeout),
            read_timeout=self.timeout,
            polling_interval=_POLL_S,
        )
        try:
            with client:
                poller = client.begin_analyze_document(
                    self.model, io.BytesIO(file.data), output_content_format=DocumentContentFormat.MARKDOWN
                )
                # The SDK polls in a thread of its own; past the deadline the file is given up here, and
                # that thread stops when the service ends the operation (or a poll fails).
                result = poller.result(timeout=max(0.0, deadline - time.monotonic()))
                if not poller.done():
                    raise OcrFailed(f"{_SERVICE} did not finish within {self.timeout:g}s")
        except ClientAuthenticationError as exc:
            raise OcrFailed(
                f"{_SERVICE} refused the key (HTTP {exc.status_code}): check AZURE_DOCUMENT_INTELLIGENCE_KEY"
            ) from exc
        except HttpResponseError as exc:
            code = getattr(exc.error, "code", None) if exc.error is not None else None
            detail = f" ({code})" if code else ""
            status = exc.status_code or 0
            if status >= 400:
                # A file the service refuses (400, 415) is refused again; an outage or a quota passes.
                passing = status in (403, 408, 429) or status >= 500
                raise OcrFailed(f"{_SERVICE} answered HTTP {status}{detail}", retry=passing) from exc
            # The operation itself failed (a file the service cannot read): polled with HTTP 200.
            raise OcrFailed(f"{_SERVICE} could not analyze the file{detail}", retry=False) from exc
        except ServiceResponseTimeoutError as exc:
            raise OcrFailed(f"{_SERVICE} did not answer within {self.timeout:g}s") from exc
        except ServiceResponseError as exc:
            raise OcrFailed(
                f"{_SERVICE} did not answer in time or broke the connection ({_kind(exc)})"
            ) from exc
        except ServiceRequestError as exc:
            raise OcrFailed(f"{_SERVICE} could not be reached at {self.endpoint} ({_kind(exc)})") from exc
        content = result.content if result is not None else ""
        title, markdown = normalize(content or "")
        if progress:
            progress(len(file.pages), len(file.pages))
        if not markdown:  # read, and nothing found: the pages are there, empty
            return OcrResult(pages=dict.fromkeys(file.pages, ""))
        return OcrResult(document=markdown, title=title)


def _kind(exc: Exception) -> str:
    inner = exc.__cause__ or exc.__context__
    return (inner or exc).__class__.__name__


def document_intelligence_engine(settings: OcrSettings) -> DocumentIntelligenceOcr:
    return DocumentIntelligenceOcr(
        settings.azure_endpoint,
        settings.azure_key.get_secret_value(),
        settings.azure_model,
        settings.azure_timeout,
        settings.azure_retries,
    )
