"""The Azure AI Search side of `python -m crag.cli.ingest DIR --target azure`.

Creates or updates the index (fields, vector profile, semantic configuration), then makes it hold
exactly the folder's chunks: unchanged files (same fingerprint) are skipped, changed ones embedded
(in vector / hybrid mode) and uploaded in batches, removed ones deleted.
"""

from __future__ import annotations

import hashlib
import logging
import sys
from dataclasses import replace
from pathlib import Path

from tqdm import tqdm

from crag.access.files import AccessFileError
from crag.config.engine_settings import CragSettings
from crag.core.models import Chunk
from crag.ingest.azure_index import AzureSearchIndex, ensure_index, file_fingerprint, sync_chunks
from crag.ingest.chunker import chunk_document, document_url
from crag.ingest.loaders import DocumentError, discover, load
from crag.ingest.local_target import AccessSource, warn_about
from crag.ingest.ocr.choice import ocr_engine
from crag.ingest.ocr.ocr_engine import OcrEngine
from crag.ingest.ocr.scans import OcrContext
from crag.providers.llm.client import LlmClient
from crag.retrieval.embed.llm import LlmEmbedder
from crag.retrieval.search.azure import SearchUnavailable

log = logging.getLogger(__name__)


async def ingest_azure(docs_dir: Path, settings: CragSettings) -> int:
    try:
        config = settings.azure_search.config()
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    llm = LlmClient.from_settings(settings.llm)
    embedder = LlmEmbedder(llm) if llm is not None and llm.embedding_model else None
    if config.mode != "keyword" and embedder is None:
        print(f"error: AZURE_SEARCH_MODE={config.mode} needs an embedding model", file=sys.stderr)
        return 2

    try:
        chunks, hashes, skipped = read_folder(
            docs_dir, settings, embedder.name if embedder else "", ocr_engine(settings)
        )
    except AccessFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        await ensure_index(config)
        with tqdm(unit="chunk", file=sys.stderr, desc="uploading") as bar:

            def progress(stage: str, done: int, total: int) -> None:
                bar.set_description(stage)
                bar.total = total
                bar.update(done - bar.n)

            async with AzureSearchIndex(config) as index:
                report = await sync_chunks(index, chunks, hashes, embedder, progress=progress)
    except SearchUnavailable as exc:
        print(f"error: Azure AI Search: {exc}", file=sys.stderr)
        return 1
    finally:
        if llm is not None:
            await llm.close()
    print(
        f"index {config.index_name}: {len(report.uploaded_files)} file(s) uploaded "
        f"({report.uploaded_chunks} chunks), {len(report.unchanged_files)} unchanged, "
        f"{len(report.removed_files)} removed ({report.deleted_chunks} chunks deleted)"
    )
    if skipped:
        print(f"skipped {len(skipped)} file(s):")
        for reason in skipped:
            print(f"  - {reason}")
    return 0


def read_folder(
    docs_dir: Path, settings: CragSettings, embedding_model: str, ocr: OcrEngine | None = None
) -> tuple[list[Chunk], dict[str, str], list[str]]:
    """Chunks of every readable file, with its readers from the folder's access file (or
    CRAG_ACCESS_FILE), their fingerprints, and why the others were skipped (scanned pages read with
    `ocr`; None: skipped). Raises AccessFileError when the access file cannot be used: nothing is
    uploaded without the rules."""
    local = settings.for_docs(docs_dir)
    rules = AccessSource(local.access_path, bool(local.access_file)).read()
    chunks: list[Chunk] = []
    hashes: dict[str, str] = {}
    skipped: list[str] = []  # symbolic links (never followed) first, then unreadable files
    files = discover(docs_dir, skipped)
    bar = tqdm(files, unit="file", file=sys.stderr, desc="reading")
    for path in bar:
        rel = path.relative_to(docs_dir).as_posix()

        def page_progress(page: int, pages: int, name: str = path.name) -> None:
            bar.set_postfix_str(f"OCR {page}/{pages} {name}"[:40])

        try:
            doc = replace(
                load(path, docs_dir, OcrContext(ocr, page_progress)), allowed=rules.allowed_for(rel)
            )
        except DocumentError as exc:
            skipped.append(str(exc))
            continue
        if doc.scan is not None and doc.scan.skipped:
            log.warning(
                "indexed without some pages: %s: %d of %d scanned page(s) not read (%s)",
                rel,
                doc.scan.skipped,
                doc.scan.scanned,
                doc.scan.reason,
            )
        url = document_url(settings.docs_base_url, rel)
        file_chunks = chunk_document(doc, settings.chunk_max_chars, url, settings.chunk_max_tokens)
        if not file_chunks:
            continue
        chunks.extend(file_chunks)
        # New readers re-upload the file (a permission change is in the index on the next ingest);
        # a file without known readers keeps the fingerprint it had before access rules existed.
        readers = {} if doc.allowed is None else {"allowed": doc.allowed}
        hashes[rel] = file_fingerprint(
            hashlib.sha256(path.read_bytes()).hexdigest(),
            max_chars=settings.chunk_max_chars,
            max_tokens=settings.chunk_max_tokens,
            base_url=settings.docs_base_url,
            embedder=embedding_model,
            # Only files with scanned pages depend on the OCR engine: a new one re-uploads just those.
            **({"ocr": doc.scan.engine} if doc.scan is not None else {}),
            **readers,
        )
    warn_about(rules, [f.relative_to(docs_dir).as_posix() for f in files])
    return chunks, hashes, skipped
