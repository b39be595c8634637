"""python -m crag.ingest DIR [--target local|azure] [--index-dir PATH]

Reads every supported file under DIR (Markdown, text, HTML, PDF, Word, PowerPoint, Excel, CSV),
splits it into chunks and fills the local index (default) or the Azure AI Search index of the
settings. Unchanged files (same content hash) are not read again; files that disappeared are
removed from the index; unreadable files are skipped, counted and named.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from tqdm import tqdm

from crag.factory import attach_embeddings
from crag.ingest.local_target import BuildReport, build_local_index
from crag.llm.client import LlmClient
from crag.search.local_index import LocalIndex
from crag.settings import CragSettings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m crag.ingest", description=__doc__.split("\n\n")[1])
    parser.add_argument("docs", type=Path, help="folder of documents")
    parser.add_argument("--target", choices=("local", "azure"), default="local")
    parser.add_argument("--index-dir", type=Path, default=None, help="local index folder (CRAG_INDEX_DIR)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
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

        return int(asyncio.run(ingest_azure(args.docs, settings)))
    index_dir = args.index_dir or settings.index_dir
    with tqdm(unit="file", file=sys.stderr, desc="reading") as bar:

        def progress(name: str, done: int, total: int) -> None:
            bar.total = total
            bar.set_postfix_str(name[:40])
            bar.update(done - bar.n)

        index, report = build_local_index(
            args.docs,
            index_dir,
            settings.chunk_max_chars,
            settings.docs_base_url,
            progress,
            settings.chunk_max_tokens,
        )
    print_report(report, index_dir)
    return asyncio.run(embed_index(index, settings))


async def embed_index(index: LocalIndex, settings: CragSettings) -> int:
    """Compute the index's missing chunk and sentence vectors (reused by content hash), with a bar."""
    llm = LlmClient.from_settings(settings) if settings.embeddings in ("auto", "llm") else None
    try:
        choice = attach_embeddings(settings, index, llm)
        vectors = index.vectors
        if vectors is None:
            if choice.notice:
                print(f"no vectors ({choice.notice}): the index is lexical only (BM25)")
            return 0
        with tqdm(unit="text", file=sys.stderr, desc="embedding") as bar:

            def progress(done: int, total: int) -> None:
                bar.total = total
                bar.update(done - bar.n)

            try:
                await vectors.build(progress)
            except Exception as exc:  # the embedder's own failure; its text may hold a key
                print(f"error: embedding failed ({exc.__class__.__name__})", file=sys.stderr)
                return 1
        print(
            f"vectors: {vectors.total} texts (chunks and sentences) with {vectors.model}, "
            f"{vectors.embedded} embedded now, {vectors.total - vectors.embedded} reused, "
            f"in {vectors.seconds:.1f}s"
        )
        return 0
    finally:
        if llm is not None:
            await llm.close()


def print_report(report: BuildReport, where: object) -> None:
    rate = report.bytes / 1e6 / report.seconds if report.seconds else 0.0
    print(
        f"indexed {report.documents} documents ({report.reused} unchanged), {report.chunks} chunks "
        f"into {where} in {report.seconds:.1f}s ({rate:.1f} MB/s of new text)"
    )
    if report.skipped:
        print(f"skipped {len(report.skipped)} file(s):")
        for reason in report.skipped:
            print(f"  - {reason}")


if __name__ == "__main__":
    raise SystemExit(main())
