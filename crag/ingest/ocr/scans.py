"""What the format converters call to read scanned pages: the engine's result, or, when the engine is
missing or fails, the pages left unread and why. Every outcome is counted in a ScanReport."""

from __future__ import annotations

from dataclasses import dataclass, field

from crag.ingest.ocr.ocr_engine import (
    OcrEngine,
    OcrFailed,
    OcrUnavailable,
    PageProgress,
    ScannedFile,
)

NO_ENGINE = "no OCR engine was given"


@dataclass(frozen=True)
class OcrContext:
    """What a converter needs to read scanned pages: the engine (None: none) and who hears progress."""

    engine: OcrEngine | None = None
    progress: PageProgress | None = None


@dataclass(frozen=True)
class ScanReport:
    """What OCR did for one file: for the build report, /api/health and the next build."""

    engine: str  # OcrEngine.name
    scanned: int  # pages (or image frames) without a text layer that show something
    read: int  # of those, how many the engine read
    reason: str = ""  # why the others were not read
    retry: bool = False  # the failure may pass (a service error): read the file again next build

    @property
    def skipped(self) -> int:
        return self.scanned - self.read


@dataclass(frozen=True)
class ScanOutcome:
    report: ScanReport
    pages: dict[int, str] = field(default_factory=dict)  # page index -> text read
    document: str = ""  # the whole file as Markdown, when the engine reads whole documents
    title: str = ""


def read_scans(context: OcrContext, file: ScannedFile) -> ScanOutcome:
    engine = context.engine
    scanned = len(file.pages)
    if engine is None:
        return ScanOutcome(ScanReport("none", scanned, 0, NO_ENGINE))
    if context.progress:
        context.progress(0, scanned)  # OCR is slow: say at once which file it is on
    try:
        result = engine.read(file, context.progress)
    except OcrUnavailable as exc:
        return ScanOutcome(ScanReport(engine.name, scanned, 0, str(exc)))
    except OcrFailed as exc:
        return ScanOutcome(ScanReport(engine.name, scanned, 0, str(exc), retry=exc.retry))
    if result.document.strip():
        return ScanOutcome(
            ScanReport(engine.name, scanned, scanned), document=result.document, title=result.title
        )
    pages = {i: text for i, text in result.pages.items() if i in file.pages}
    reason = ""
    if result.failures:
        first, why = min(result.failures.items())
        reason = f"page {first + 1}: {why}"
        if len(result.failures) > 1:
            reason += f" (and {len(result.failures) - 1} more)"
    return ScanOutcome(ScanReport(engine.name, scanned, len(pages), reason), pages=pages)
