"""Scanned documents read by the real Tesseract (Debian tesseract-ocr, -jpn, -eng; .ci/run installs
them): generated page images and image-only PDFs in Japanese and English, a mixed PDF, a scanned
Japanese page found by a Japanese question, the counts in the build report, the CLI and /api/health,
and a build with OCR that leaves the event loop free. Without Tesseract these tests are skipped with
the reason (and fail when CRAG_REQUIRE_SERVICES=1); those about a missing Tesseract run everywhere."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path

import pytest
from pypdf import PdfReader

from crag.cli.ingest import main as ingest_main
from crag.config.engine_settings import CragSettings
from crag.ingest.loaders import DocumentError, load
from crag.ingest.local_target import load_or_build
from crag.ingest.ocr.scans import OcrContext
from crag.ingest.ocr.tesseract import TesseractOcr, clean
from crag.runtime.factory import ocr_engine
from crag.runtime.handle import EngineHandle
from tests.crag.ingest.scan_images import image_only_pdf, mixed_pdf, page_image, png_bytes
from tests.paths import SAMPLE_DOCS
from tests.servers.harness import unavailable

JA_LINES = [
    "社用車の利用規程",
    "社用車の予約は総務部の予約システムで行う。",
    "給油カードは車検証入れに保管すること。",
    "走行距離は返却時に記録簿へ記入する。",
]
JA_KEYWORDS = ["社用車", "利用規程", "総務部", "給油カード", "車検証", "走行距離", "記録簿"]
EN_LINES = [
    "Badge replacement policy",
    "A lost security badge costs 2,000 yen to replace.",
    "Report the loss to the reception desk within 24 hours.",
]
EN_KEYWORDS = ["badge", "replacement", "security", "2,000", "reception", "24 hours"]


def settings_for(root: Path, **env: str) -> CragSettings:
    env = {"CRAG_OCR": "tesseract", "CRAG_EMBEDDINGS": "off", "CRAG_WATCH_DOCS": "false", **env}
    return CragSettings(CRAG_DOCS_DIR=str(root / "docs"), CRAG_INDEX_DIR=str(root / "index"), **env)


def tesseract(root: Path) -> TesseractOcr:
    """The engine the settings build when Tesseract and both language packs are installed."""
    engine = ocr_engine(settings_for(root))
    if not isinstance(engine, TesseractOcr) or engine.languages != "jpn+eng":
        reason = getattr(engine, "reason", f"only the language packs {getattr(engine, 'languages', '')}")
        unavailable(f"Tesseract with jpn+eng is needed: {reason}")
    assert isinstance(engine, TesseractOcr)
    return engine


def found(text: str, keywords: list[str]) -> list[str]:
    """The keywords present in OCR output, compared without spaces or case (OCR spaces words freely)."""
    flat = "".join(text.split()).casefold()
    return [k for k in keywords if "".join(k.split()).casefold() in flat]


def assert_reads(text: str, keywords: list[str]) -> None:
    # OCR may misread a character now and then: all keywords but one must be there, word for word.
    hits = found(text, keywords)
    assert len(hits) >= len(keywords) - 1, f"OCR found only {hits} of {keywords} in {text!r}"


def test_ocr_output_loses_the_spaces_tesseract_puts_between_japanese_letters() -> None:
    assert (
        clean("有 給 休 暇 は 20 日\x0cまで。 Paid  leave\n\n\n\n次")
        == "有給休暇は 20 日\nまで。 Paid leave\n\n次"
    )


def test_a_japanese_and_english_page_image_is_read(tmp_path: Path) -> None:
    engine = tesseract(tmp_path)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "社用車.png").write_bytes(png_bytes(page_image(JA_LINES + EN_LINES)))
    doc = load(docs / "社用車.png", docs, OcrContext(engine))
    assert_reads(doc.text, JA_KEYWORDS)
    assert_reads(doc.text, EN_KEYWORDS)
    assert doc.title == "社用車"  # an image's title is its file name
    assert doc.scan is not None and (doc.scan.scanned, doc.scan.read) == (1, 1)
    assert doc.scan.engine == "tesseract:jpn+eng"


def test_an_image_only_pdf_is_read_page_by_page(tmp_path: Path) -> None:
    engine = tesseract(tmp_path)
    pdf = image_only_pdf([page_image(JA_LINES), page_image(EN_LINES)], tmp_path / "scan.pdf")
    assert all(not (page.extract_text() or "").strip() for page in PdfReader(pdf).pages)  # no text layer
    pages: list[tuple[int, int]] = []
    doc = load(pdf, tmp_path, OcrContext(engine, lambda done, total: pages.append((done, total))))
    assert doc.scan is not None and (doc.scan.scanned, doc.scan.read, doc.scan.skipped) == (2, 2, 0)
    assert pages == [(0, 2), (1, 2), (2, 2)]  # progress before the first page and after each
    page_1, page_2 = doc.text.split("## Page 2")
    assert "## Page 1" in page_1
    assert_reads(page_1, JA_KEYWORDS)
    assert_reads(page_2, EN_KEYWORDS)
    assert not found(page_1, ["reception"]) and not found(page_2, ["給油カード"])  # each on its page


def test_every_page_of_a_multi_page_tiff_is_read_and_a_damaged_image_named(tmp_path: Path) -> None:
    engine = tesseract(tmp_path)
    first, second = page_image(JA_LINES), page_image(EN_LINES)
    first.save(tmp_path / "fax.tif", save_all=True, append_images=[second], compression="tiff_deflate")
    doc = load(tmp_path / "fax.tif", tmp_path, OcrContext(engine))
    assert doc.scan is not None and (doc.scan.scanned, doc.scan.read) == (2, 2)
    page_1, page_2 = doc.text.split("## Page 2")
    assert_reads(page_1, JA_KEYWORDS)
    assert_reads(page_2, EN_KEYWORDS)
    (tmp_path / "cut.png").write_bytes(png_bytes(first)[:2000])  # a copy that stopped half-way
    with pytest.raises(
        DocumentError, match=r"^cut\.png: an image that was not read: page 1: the page could not be"
    ):
        load(tmp_path / "cut.png", tmp_path, OcrContext(engine))


def test_a_mixed_pdf_keeps_its_text_page_and_reads_only_the_scanned_one(tmp_path: Path) -> None:
    engine = tesseract(tmp_path)
    text = "本文のページです。来客用の駐車場は北側の第二駐車場です。"
    pdf = mixed_pdf(text, page_image(JA_LINES), tmp_path / "mixed.pdf")
    doc = load(pdf, tmp_path, OcrContext(engine))
    # The blank third page is no scan: one scanned page, read.
    assert doc.scan is not None and (doc.scan.scanned, doc.scan.read) == (1, 1)
    page_1, rest = doc.text.split("## Page 2")
    assert text in page_1  # the text layer, exactly as pypdf reads it
    assert_reads(rest, JA_KEYWORDS)


def test_a_scanned_japanese_page_becomes_searchable(tmp_path: Path) -> None:
    tesseract(tmp_path)
    docs = tmp_path / "docs"
    shutil.copytree(SAMPLE_DOCS, docs)  # the sample company's documents around the scan
    (docs / "scans").mkdir()
    image_only_pdf([page_image(JA_LINES)], docs / "scans" / "社用車規程.pdf")

    async def answer() -> None:
        handle = EngineHandle(settings_for(tmp_path))
        await handle.open()
        try:
            assert handle.report is not None and handle.report.ocr_pages == 1
            assert handle.engine is not None
            result = await handle.engine.run("社用車の給油カードはどこに保管しますか？")
            top = max(result.graded, key=lambda g: g.score)
            assert top.chunk.file == "scans/社用車規程.pdf", [(g.chunk.file, g.score) for g in result.graded]
            assert "scans/社用車規程.pdf" in result.cited_files
            assert found(result.answer, ["車検証"]), result.answer
            status = handle.status()[1]
            assert status["ocr"] == {"engine": "tesseract:jpn+eng", "pages_read": 1, "pages_skipped": 0}
        finally:
            await handle.close()

    asyncio.run(answer())


def test_without_tesseract_scans_are_skipped_with_how_to_install_it_and_text_pages_kept(
    tmp_path: Path,
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "badge.png").write_bytes(png_bytes(page_image(EN_LINES)))
    mixed_pdf("来客用の駐車場は北側の第二駐車場です。", page_image(JA_LINES), docs / "mixed.pdf")
    (docs / "canteen.md").write_text("# Canteen\n\nThe canteen opens at 11:30.", "utf-8")
    settings = settings_for(tmp_path, CRAG_TESSERACT_CMD=str(tmp_path / "no-such-tesseract"))

    async def build() -> None:
        handle = EngineHandle(settings)
        await handle.open()
        try:
            report = handle.report
            assert report is not None and report.ocr_engine == "none"
            assert (report.documents, report.ocr_pages, report.ocr_skipped_pages) == (2, 0, 2)
            [skipped] = report.skipped
            assert skipped.startswith("badge.png: an image that was not read: Tesseract is not installed")
            assert "apt-get install tesseract-ocr tesseract-ocr-jpn tesseract-ocr-eng" in skipped
            [note] = report.ocr_notes
            assert note.startswith("mixed.pdf: 1 of 1 scanned page(s) not read (Tesseract is not installed")
            index = handle.local_index
            assert index is not None
            hits = index.search_terms(index.terms("来客用の駐車場"), 3)
            assert hits and hits[0].chunk.file == "mixed.pdf"  # its text page is indexed
            status = handle.status()[1]
            assert status["skipped_documents"] == 1
            ocr = status["ocr"]
            assert isinstance(ocr, dict)
            assert (ocr["engine"], ocr["pages_read"], ocr["pages_skipped"]) == ("none", 0, 2)
            assert "apt-get install tesseract-ocr" in str(ocr["notice"])
        finally:
            await handle.close()

    asyncio.run(build())


def test_scans_skipped_for_want_of_tesseract_are_read_once_it_is_installed(tmp_path: Path) -> None:
    tesseract(tmp_path)
    docs, index_dir = tmp_path / "docs", tmp_path / "index"
    docs.mkdir()
    (docs / "badge.png").write_bytes(png_bytes(page_image(EN_LINES)))
    mixed_pdf("来客用の駐車場は北側の第二駐車場です。", page_image(JA_LINES), docs / "mixed.pdf")
    (docs / "canteen.md").write_text("# Canteen\n\nThe canteen opens at 11:30.", "utf-8")
    missing = ocr_engine(settings_for(tmp_path, CRAG_TESSERACT_CMD=str(tmp_path / "no-such-tesseract")))
    _, before = load_or_build(docs, index_dir, ocr=missing)
    assert before is not None and before.ocr_skipped_pages == 2

    installed = ocr_engine(settings_for(tmp_path))
    index, after = load_or_build(docs, index_dir, ocr=installed)
    # A new engine: both files with scans are read again; the Markdown file is reused as it was.
    assert after is not None and (after.reused, after.ocr_pages, after.ocr_skipped_pages) == (1, 2, 0)
    assert after.skipped == [] and index.documents == 3
    assert_reads(" ".join(c.text for c in index.chunks if c.file == "badge.png"), EN_KEYWORDS)
    assert_reads(" ".join(c.text for c in index.chunks if c.file == "mixed.pdf"), JA_KEYWORDS)
    _, again = load_or_build(docs, index_dir, ocr=installed)
    assert again is None  # same engine, same files: loaded as stored, no OCR


def test_ocr_off_and_missing_language_packs_say_so(tmp_path: Path) -> None:
    (tmp_path / "scan.png").write_bytes(png_bytes(page_image(EN_LINES)))
    off = ocr_engine(settings_for(tmp_path, CRAG_OCR="off"))
    with pytest.raises(
        DocumentError, match=r"^scan\.png: an image that was not read: OCR is off \(CRAG_OCR=off\)$"
    ):
        load(tmp_path / "scan.png", tmp_path, OcrContext(off))
    tesseract(tmp_path)
    no_packs = ocr_engine(settings_for(tmp_path, CRAG_OCR_LANGUAGES="xxx+yyy"))
    with pytest.raises(DocumentError, match=r"none of the language packs xxx\+yyy.*tesseract-ocr-xxx"):
        load(tmp_path / "scan.png", tmp_path, OcrContext(no_packs))


def test_a_page_tesseract_cannot_finish_in_time_is_skipped_with_the_reason(tmp_path: Path) -> None:
    tesseract(tmp_path)
    engine = ocr_engine(settings_for(tmp_path, CRAG_OCR_PAGE_TIMEOUT="0.01"))
    pdf = mixed_pdf("来客用の駐車場は北側の第二駐車場です。", page_image(JA_LINES), tmp_path / "mixed.pdf")
    doc = load(pdf, tmp_path, OcrContext(engine))
    assert doc.scan is not None and (doc.scan.scanned, doc.scan.read) == (1, 0)
    assert doc.scan.reason.startswith("page 2: Tesseract took over 0.01s")
    assert "来客用の駐車場" in doc.text and not found(doc.text, ["給油カード"])


def test_the_ingest_cli_reports_pages_read_and_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tesseract(tmp_path)
    docs = tmp_path / "docs"
    docs.mkdir()
    image_only_pdf([page_image(JA_LINES), page_image(EN_LINES)], docs / "scan.pdf")
    (docs / "canteen.md").write_text("# Canteen\n\nThe canteen opens at 11:30.", "utf-8")
    code = ingest_main([str(docs), "--index-dir", str(tmp_path / "index")])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "indexed 2 documents" in out.out
    assert "OCR (tesseract:jpn+eng): 2 scanned page(s) read" in out.out and ", 0 not read" in out.out
    assert "OCR 1/2 scan.pdf" in out.err  # the progress bar names the page it is on
    manifest = json.loads((tmp_path / "index" / "manifest.json").read_text("utf-8"))
    assert manifest["scans"]["scan.pdf"]["read"] == 2


def test_a_build_with_ocr_leaves_the_event_loop_free(tmp_path: Path) -> None:
    tesseract(tmp_path)
    docs = tmp_path / "docs"
    docs.mkdir()
    image_only_pdf([page_image(JA_LINES), page_image(EN_LINES), page_image(JA_LINES)], docs / "scan.pdf")
    progress: list[tuple[float, str]] = []  # (when, what the bar shows), heard from the build's thread

    async def build_while_ticking() -> list[tuple[float, float]]:
        handle = EngineHandle(settings_for(tmp_path))
        ticks: list[tuple[float, float]] = []  # (tick start, tick end) of a 10 ms sleep on the loop
        stop = asyncio.Event()

        async def tick() -> None:
            while not stop.is_set():
                started = time.perf_counter()
                await asyncio.sleep(0.01)
                ticks.append((started, time.perf_counter()))

        ticker = asyncio.create_task(tick())
        try:
            await handle.open(lambda name, done, total: progress.append((time.perf_counter(), name)))
        finally:
            stop.set()
            await ticker
            await handle.close()
        assert handle.report is not None and handle.report.ocr_pages == 3
        return ticks

    ticks = asyncio.run(build_while_ticking())
    assert [name for _, name in progress if name.startswith("OCR")] == [
        f"OCR {n}/3 scan.pdf" for n in range(4)
    ]
    ocr_start = next(at for at, name in progress if name == "OCR 0/3 scan.pdf")
    ocr_end = next(at for at, name in progress if name == "OCR 3/3 scan.pdf")
    during = [end - start for start, end in ticks if start >= ocr_start and end <= ocr_end]
    # Three pages of OCR take seconds; all the while the loop went on ticking every 10 ms or so.
    assert ocr_end - ocr_start > 1.0 and len(during) > 30, (ocr_end - ocr_start, len(during))
    assert max(during) < 0.25, sorted(during)[-5:]
