"""Azure AI Document Intelligence as the OCR engine: the real SDK (azure-ai-documentintelligence)
against a fake service on 127.0.0.1 (tests/fakes/document_intelligence.py). Whole files go to it and
its Markdown (headings, HTML tables, page markers) becomes the document; its failures (401, 500,
timeouts, a file it cannot read) skip the file with a clear reason, and the passing ones are tried
again at the next build."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fpdf import FPDF
from PIL import Image

from crag.config.engine_settings import CragSettings
from crag.ingest.chunker import chunk_document
from crag.ingest.loaders import load
from crag.ingest.local_target import load_or_build
from crag.ingest.ocr.document_intelligence import DocumentIntelligenceOcr
from crag.ingest.ocr.ocr_engine import OcrEngine
from crag.ingest.ocr.scans import OcrContext
from crag.runtime.factory import ocr_engine
from tests.fakes.document_intelligence import FakeDocumentIntelligence

KEY = "test-di-key"
LAYOUT_MARKDOWN = """<!-- PageHeader="社外秘" -->

# 出張旅費規程

## 日当

出張の日当は次のとおりとする。

<table>
<caption>表1 日当</caption>
<tr><th>区分</th><th>日当</th></tr>
<tr><td>国内</td><td>3,000円</td></tr>
<tr><td>海外</td><td>6,000円</td></tr>
</table>

<!-- PageBreak -->

<!-- PageNumber="2" -->

## 精算

<figure>
<figcaption>図1 申請の流れ</figcaption>
申請 → 承認 → 支払
</figure>

領収書を添付する。 :selected: 原本
"""


@pytest.fixture
async def service() -> AsyncIterator[FakeDocumentIntelligence]:
    fake = FakeDocumentIntelligence(key=KEY, markdown=LAYOUT_MARKDOWN)
    await fake.start()
    yield fake
    await fake.stop()


def engine_for(service: FakeDocumentIntelligence, key: str = KEY, timeout: str = "10") -> OcrEngine:
    settings = CragSettings(
        CRAG_OCR="auto",  # Document Intelligence wins when its endpoint and key are set
        AZURE_DOCUMENT_INTELLIGENCE_ENDPOINT=service.url,
        AZURE_DOCUMENT_INTELLIGENCE_KEY=key,
        AZURE_DOCUMENT_INTELLIGENCE_TIMEOUT=timeout,
        AZURE_DOCUMENT_INTELLIGENCE_RETRIES="0",
    )
    engine = ocr_engine(settings)
    assert isinstance(engine, DocumentIntelligenceOcr)
    return engine


def scanned_image(path: Path) -> bytes:
    """An image file (its pixels do not matter: the fake reads none)."""
    image = Image.new("L", (400, 200), 255)
    for x in range(50, 350):
        image.putpixel((x, 100), 0)
    image.save(path)
    return path.read_bytes()


def text_and_scan_pdf(path: Path) -> bytes:
    pdf = FPDF()
    pdf.set_font("helvetica", size=14)
    pdf.add_page()
    pdf.multi_cell(0, 10, "The text layer of page one.")
    pdf.add_page()
    scan = Image.new("L", (800, 1100), 255)
    for x in range(100, 700):
        for y in (200, 201, 400, 401):
            scan.putpixel((x, y), 0)
    pdf.image(scan, x=0, y=0, w=210)
    pdf.output(str(path))
    return path.read_bytes()


async def test_an_image_becomes_the_services_markdown_with_its_tables_and_headings(
    service: FakeDocumentIntelligence, tmp_path: Path
) -> None:
    data = scanned_image(tmp_path / "travel.png")
    engine = engine_for(service)
    doc = await asyncio.to_thread(load, tmp_path / "travel.png", tmp_path, OcrContext(engine))

    [request] = service.analyzed
    assert request.path == "/documentintelligence/documentModels/prebuilt-layout:analyze"
    assert request.query["outputContentFormat"] == "markdown" and request.query["api-version"]
    assert request.headers["Content-Type"] == "application/octet-stream"
    assert request.headers["Ocp-Apim-Subscription-Key"] == KEY
    assert request.body == data  # the whole file, as it is on disk
    assert len([r for r in service.requests if r.method == "GET"]) == 2  # "running", then "succeeded"

    assert doc.title == "出張旅費規程" and doc.scan is not None
    assert (doc.scan.engine, doc.scan.scanned, doc.scan.read) == (
        "azure-document-intelligence:prebuilt-layout",
        1,
        1,
    )
    assert "<" not in doc.text and "PageBreak" not in doc.text and "社外秘" not in doc.text
    assert "表1 日当\n\n| 区分 | 日当 |\n| --- | --- |\n| 国内 | 3,000円 |\n| 海外 | 6,000円 |" in doc.text
    assert "図1 申請の流れ" in doc.text and "☑ 原本" in doc.text
    chunks = chunk_document(doc, 1200, "")
    assert [c.headers for c in chunks] == [["出張旅費規程", "日当"], ["出張旅費規程", "精算"]]
    assert "海外 | 6,000円" in chunks[0].text and "領収書を添付する" in chunks[1].text


async def test_a_pdf_with_a_scanned_page_goes_whole_and_a_text_pdf_not_at_all(
    service: FakeDocumentIntelligence, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    data = text_and_scan_pdf(docs / "mixed.pdf")
    text_pdf = FPDF()
    text_pdf.set_font("helvetica", size=14)
    text_pdf.add_page()
    text_pdf.multi_cell(0, 10, "Only text here: the canteen opens at 11:30.")
    text_pdf.output(str(docs / "text.pdf"))

    index, report = await asyncio.to_thread(load_or_build, docs, tmp_path / "index", ocr=engine_for(service))
    assert [r.body for r in service.analyzed] == [data]  # the text-only PDF was read locally
    assert (
        report is not None
        and report.documents == 2
        and (report.ocr_pages, report.ocr_skipped_pages) == (1, 0)
    )
    mixed = [c for c in index.chunks if c.file == "mixed.pdf"]
    assert mixed[0].title == "出張旅費規程" and any("国内 | 3,000円" in c.text for c in mixed)
    assert any("canteen opens" in c.text for c in index.chunks if c.file == "text.pdf")


@pytest.mark.parametrize(
    ("setup", "reason", "retried"),
    [
        (
            "wrong key",
            "Azure AI Document Intelligence refused the key (HTTP 401): "
            "check AZURE_DOCUMENT_INTELLIGENCE_KEY",
            True,
        ),
        ("500", "Azure AI Document Intelligence answered HTTP 500 (InternalServerError)", True),
        ("never finishes", "Azure AI Document Intelligence did not finish within 1s", True),
        ("hangs", "Azure AI Document Intelligence did not answer within 1s", True),
        ("cannot read", "Azure AI Document Intelligence could not analyze the file (InvalidContent)", False),
    ],
)
async def test_service_failures_skip_the_file_with_a_clear_reason(
    service: FakeDocumentIntelligence, tmp_path: Path, setup: str, reason: str, retried: bool
) -> None:
    docs, index_dir = tmp_path / "docs", tmp_path / "index"
    docs.mkdir()
    scanned_image(docs / "scan.png")
    (docs / "canteen.md").write_text("# Canteen\n\nThe canteen opens at 11:30.", "utf-8")
    key = "wrong-key" if setup == "wrong key" else KEY
    service.fail_status = 500 if setup == "500" else None
    service.never_finish = setup == "never finishes"
    service.hang_s = 3.0 if setup == "hangs" else 0.0
    service.fail_operation = "InvalidContent" if setup == "cannot read" else None

    index, report = await asyncio.to_thread(
        load_or_build, docs, index_dir, ocr=engine_for(service, key=key, timeout="1")
    )
    assert report is not None and report.documents == 1 and report.ocr_skipped_pages == 1
    assert report.skipped == [f"scan.png: an image that was not read: {reason}"]
    assert "wrong-key" not in report.skipped[0] and KEY not in report.skipped[0]
    assert {c.file for c in index.chunks} == {"canteen.md"}
    manifest = json.loads((index_dir / "manifest.json").read_text("utf-8"))
    assert manifest["scans"]["scan.png"]["retry"] is retried

    # The service is fine again (and the key right): a failure that may pass is tried again.
    service.fail_status, service.never_finish, service.hang_s, service.fail_operation = None, False, 0.0, None
    index, report = await asyncio.to_thread(load_or_build, docs, index_dir, ocr=engine_for(service))
    if retried:
        assert report is not None and report.reused == 1 and report.skipped == []
        assert any("国内 | 3,000円" in c.text for c in index.chunks if c.file == "scan.png")
    else:
        assert report is None  # a file the service cannot read is not sent again until it changes
