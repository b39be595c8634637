"""Azure AI Search as the target of a SharePoint library sync.

The changed files' chunks are embedded (in vector / hybrid mode) and uploaded, removed files' chunks
deleted, with the pieces `python -m crag.cli.ingest DIR --target azure` uses (crag/ingest/azure_index.py).
Each file's stored content_hash folds its key (content version, webUrl, readers) with the index
settings, so the index itself says which files are current. The sync state (delta link, items seen)
is kept in a small JSON file under CRAG_SHAREPOINT_STATE_DIR, one per index and library, written
only after the index has been updated: losing it costs one full enumeration, never a wrong index.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from crag.config.azure_search import AzureSearchConfig
from crag.config.engine_settings import CragSettings
from crag.ingest.azure_index import AzureSearchIndex, SyncReport, ensure_index, file_fingerprint, sync_chunks
from crag.ingest.chunker import chunk_document
from crag.ingest.ocr.choice import ocr_engine
from crag.ingest.ocr.scans import OcrContext
from crag.ingest.sharepoint.library import Library
from crag.ingest.sharepoint.sync import Progress, SyncResult, sync_library
from crag.ingest.sharepoint.sync_state import LibraryState
from crag.providers.graph.client import GraphClient
from crag.providers.llm.client import LlmClient
from crag.retrieval.embed.llm import LlmEmbedder


def state_file(settings: CragSettings, config: AzureSearchConfig) -> Path:
    sp = settings.sharepoint
    key = "|".join([config.endpoint, config.index_name, sp.site, sp.drive, sp.folder])
    digest = hashlib.sha1(key.encode()).hexdigest()[:10]
    return sp.state_dir.expanduser() / f"{config.index_name}-{digest}.json"


def read_state(path: Path) -> LibraryState | None:
    try:
        return LibraryState.model_validate_json(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None


def write_state(path: Path, state: LibraryState) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(state.model_dump_json(), "utf-8")
    os.replace(tmp, path)


@dataclass
class AzureSync:
    result: SyncResult
    index: SyncReport
    state_path: Path


async def sync_to_azure(
    settings: CragSettings,
    client: GraphClient,
    *,
    full: bool = False,
    progress: Progress | None = None,
    upload_progress: Callable[[str, int, int], None] | None = None,
) -> AzureSync:
    """Sync the library into the Azure AI Search index of the settings. Raises ValueError for bad
    search settings, SearchUnavailable / GraphError when a service fails."""
    config = settings.azure_search.config()
    llm = LlmClient.from_settings(settings.llm)
    embedder = LlmEmbedder(llm) if llm is not None and llm.embedding_model else None
    try:
        if config.mode != "keyword" and embedder is None:
            raise ValueError(f"AZURE_SEARCH_MODE={config.mode} needs an embedding model")
        sp = settings.sharepoint
        shaping = {
            "max_chars": settings.chunk_max_chars,
            "max_tokens": settings.chunk_max_tokens,
            "base_url": "",
            "embedder": embedder.name if embedder else "",
        }

        def stored(key: str) -> str:
            return file_fingerprint(key, **shaping)

        path = state_file(settings, config)
        await ensure_index(config)
        async with AzureSearchIndex(config) as index:
            result = await sync_library(
                Library(client, sp.site, sp.drive, sp.folder),
                read_state(path),
                await index.indexed_file_hashes(),
                site_groups=sp.site_groups,
                max_bytes=sp.max_bytes,
                full=full,
                progress=progress,
                stored=stored,
                ocr=OcrContext(ocr_engine(settings)),
            )
            chunks = [
                chunk
                for rel, doc in sorted(result.documents.items())
                for chunk in chunk_document(
                    doc, settings.chunk_max_chars, result.urls[rel], settings.chunk_max_tokens
                )
            ]
            hashes = {rel: stored(key) for rel, key in result.files.items()}
            report = await sync_chunks(index, chunks, hashes, embedder, progress=upload_progress)
        write_state(path, result.state)
        return AzureSync(result, report, path)
    finally:
        if llm is not None:
            await llm.close()
