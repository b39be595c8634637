"""python -m crag.cli.ingest DIR [--target local|azure] [--index-dir PATH]
python -m crag.cli.ingest --source sharepoint --site SITE [--drive LIB] [--folder PATH] [--target ...]

Reads every supported file under DIR (Markdown, text, HTML, PDF, Word, PowerPoint, Excel, CSV, and
images of pages: PNG, JPEG, TIFF), splits it into chunks and fills the local index (default) or the
Azure AI Search index of the settings. Scanned pages are read by OCR (CRAG_OCR). Unchanged files (same
content hash) are not read again; files that disappeared are removed from the index; unreadable files
are skipped, counted and named. With --source sharepoint the files come from a SharePoint library (or
a OneDrive) through Microsoft Graph, incrementally (delta queries), with who may read each one
(docs/sharepoint.md).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm

from crag.config.engine_settings import CragSettings
from crag.ingest.local_target import BuildReport
from crag.runtime.handle import EngineHandle
from crag.runtime.traced import traced_run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m crag.cli.ingest", description=__doc__.split("\n\n")[1])
    parser.add_argument("docs", type=Path, nargs="?", help="folder of documents (the folder source)")
    parser.add_argument("--target", choices=("local", "azure"), default="local")
    parser.add_argument(
        "--index-dir",
        type=Path,
        default=None,
        help="local index folder (default: CRAG_INDEX_DIR, else the one the bot derives from the source)",
    )
    parser.add_argument("--source", choices=("folder", "sharepoint"), default="folder")
    parser.add_argument("--site", help="SharePoint site URL (default: CRAG_SHAREPOINT_SITE)")
    parser.add_argument(
        "--drive", help="document library name (default: CRAG_SHAREPOINT_DRIVE, else the site's)"
    )
    parser.add_argument("--folder", help="only this folder of the library (default: CRAG_SHAREPOINT_FOLDER)")
    parser.add_argument(
        "--full", action="store_true", help="SharePoint: enumerate everything and re-read permissions"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.source == "sharepoint":
        return _sharepoint(args)
    if args.docs is None:
        parser.error("the folder source needs DIR (or use --source sharepoint --site SITE)")
    if not args.docs.is_dir():
        print(f"error: documents folder not found: {args.docs}", file=sys.stderr)
        return 2
    try:
        settings = CragSettings()
    except ValueError as exc:
        print(f"error: invalid settings: {exc}", file=sys.stderr)
        return 2
    if args.target == "azure":
        from crag.ingest.azure_target import ingest_azure

        async def into_azure() -> int:
            return int(await ingest_azure(args.docs, settings))

        attributes = {"crag.ingest.source": "folder", "crag.ingest.target": "azure"}
        return asyncio.run(traced_run("crag.ingest", attributes, settings.tracing, into_azure))
    # The folder the bot serving DIR would use (CRAG_INDEX_DIR, else one derived from DIR); no watching.
    local = settings.for_docs(args.docs, args.index_dir).model_copy(
        update={"search_provider": "local", "watch_docs": False}
    )
    try:
        return asyncio.run(ingest_local(local))
    except KeyboardInterrupt:
        # asyncio.run cancelled the build: the vectors made so far were saved on the way out.
        print(
            "\ninterrupted: what was indexed and embedded so far is kept; "
            "run the same command again to go on from there",
            file=sys.stderr,
        )
        return 130


def _sharepoint(args: argparse.Namespace) -> int:
    given = {
        "CRAG_SHAREPOINT_SITE": args.site,
        "CRAG_SHAREPOINT_DRIVE": args.drive,
        "CRAG_SHAREPOINT_FOLDER": args.folder,
    }
    try:
        # The rest from the environment, as the bot reads it; one sync now: the schedule is the bot's.
        overrides: dict[str, Any] = {name: value for name, value in given.items() if value is not None}
        overrides["CRAG_SHAREPOINT_SYNC_MINUTES"] = 0
        settings = CragSettings(CRAG_SOURCE="sharepoint", **overrides)
    except ValueError as exc:
        print(f"error: invalid settings: {_one_line(exc)}", file=sys.stderr)
        return 2
    from crag.cli.sharepoint import run

    attributes = {"crag.ingest.source": "sharepoint", "crag.ingest.target": args.target}
    return asyncio.run(
        traced_run(
            "crag.ingest",
            attributes,
            settings.tracing,
            lambda: run(settings, args.target, args.index_dir, args.full),
        )
    )


def _one_line(exc: ValueError) -> str:
    """pydantic's message without its URLs and input dumps (which may hold a setting's value)."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        return "; ".join(str(e.get("msg", "")).removeprefix("Value error, ") for e in errors())
    return str(exc)


async def ingest_local(settings: CragSettings, quiet: bool = False) -> int:
    """Build (or bring up to date) the local index through the engine handle the bot uses, then
    compute its missing vectors, with progress bars."""
    handle = EngineHandle(settings)
    try:
        with tqdm(unit="file", file=sys.stderr, desc="reading") as bar:

            def progress(name: str, done: int, total: int) -> None:
                bar.total = total
                bar.set_postfix_str(name[:40])
                bar.update(done - bar.n)

            await handle.open(progress, embed_in_background=False)
        index = handle.local_index
        if index is None:
            print(f"error: {handle.error or 'the index could not be built'}", file=sys.stderr)
            return 1
        if quiet:
            pass
        elif handle.report is not None:
            print_report(handle.report, settings.index_dir)
        else:
            print(
                f"index {settings.index_dir} is up to date: {index.documents} documents, {index.size} chunks"
            )
        vectors = index.vectors
        if vectors is None:
            if index.vectors_notice:
                print(f"no vectors ({index.vectors_notice}): the index is lexical only (BM25)")
            return 0
        with tqdm(unit="text", file=sys.stderr, desc="embedding") as bar:

            def embed_progress(done: int, total: int) -> None:
                bar.total = total
                bar.update(done - bar.n)

            if not await handle.embed(embed_progress):
                print(f"error: embedding failed ({handle.embed_error})", file=sys.stderr)
                return 1
        print(
            f"vectors: {vectors.total} texts (chunks and sentences) with {vectors.model}, "
            f"{vectors.embedded} embedded now, {vectors.total - vectors.embedded} reused, "
            f"in {vectors.seconds:.1f}s"
        )
        return 0
    finally:
        await handle.close()


def print_report(report: BuildReport, where: object) -> None:
    rate = report.bytes / 1e6 / report.seconds if report.seconds else 0.0
    print(
        f"indexed {report.documents} documents ({report.reused} unchanged), {report.chunks} chunks "
        f"into {where} in {report.seconds:.1f}s ({rate:.1f} MB/s of new text)"
    )
    if report.ocr_pages or report.ocr_skipped_pages:
        per_page = f", {report.ocr_seconds / report.ocr_pages:.1f}s a page" if report.ocr_pages else ""
        print(
            f"OCR ({report.ocr_engine}): {report.ocr_pages} scanned page(s) read{per_page}, "
            f"{report.ocr_skipped_pages} not read"
        )
        for note in report.ocr_notes:
            print(f"  - {note}")
    if report.skipped:
        print(f"skipped {len(report.skipped)} file(s):")
        for reason in report.skipped:
            print(f"  - {reason}")


if __name__ == "__main__":
    raise SystemExit(main())
