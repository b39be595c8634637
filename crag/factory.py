"""Choose and build the providers from settings; the only place that knows them all."""

from __future__ import annotations

import logging
from collections.abc import Callable

from crag.engine import CragEngine, EngineConfig
from crag.generate.extractive import ExtractiveComposer
from crag.grade.local import LocalGrader
from crag.llm.client import LlmClient
from crag.llm.generate import LlmGenerator
from crag.llm.grade import LlmGrader
from crag.llm.refine import LlmRefiner
from crag.llm.rewrite import LlmRewriter
from crag.protocols import AnswerGenerator, Grader, KnowledgeRefiner, QueryRewriter, WebSearch
from crag.refine.passthrough import PassThroughRefiner
from crag.rewrite.local import LocalKeywordRewriter
from crag.search.local import LocalRetriever
from crag.search.local_index import BuildReport, LocalIndex
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
    return LocalIndex.open(
        settings.docs_dir.expanduser(),
        settings.index_dir.expanduser(),
        settings.chunk_max_chars,
        settings.docs_base_url or docs_base_url,
        progress,
    )


def build_engine(settings: CragSettings, index: LocalIndex | None) -> CragEngine:
    """The engine for these settings: local providers, or the LLM ones with local fallbacks.

    `index` is the local index (None when documents live in a remote index: the local fallbacks
    then weigh terms by word kind and general-language rarity only)."""
    _warn_unbuilt(settings)
    config = EngineConfig(
        upper=settings.upper_threshold,
        lower=settings.lower_threshold,
        top_k=settings.top_k,
        web_results=settings.web_results,
    )
    stats: TermStats = index if index is not None else FlatStats(term_extractor())
    rewriter: QueryRewriter = LocalKeywordRewriter(term_extractor())
    grader: Grader = LocalGrader(stats)
    generator: AnswerGenerator = ExtractiveComposer(stats, settings.answer_max_chars)
    refiner: KnowledgeRefiner = PassThroughRefiner()
    closers = []
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
    if index is None:
        raise ValueError("no document index: configure Azure AI Search or a local documents folder")
    return CragEngine(
        rewriter=rewriter,
        retriever=LocalRetriever(index),
        grader=grader,
        web=_web_search(settings),
        generator=generator,
        config=config,
        refiner=refiner,
        closers=closers,
    )


def _web_search(settings: CragSettings) -> WebSearch:
    key = settings.serpapi_api_key
    if settings.web_provider == "off" or not key.get_secret_value():
        return WebSearchOff()
    return SerpApiSearch(key, settings.serpapi_base_url, settings.serpapi_timeout)


def _warn_unbuilt(settings: CragSettings) -> None:
    # The real-service providers arrive in later work; say so rather than silently ignore keys.
    configured = {"Azure AI Search": settings.azure_search_endpoint}
    for service, value in configured.items():
        if value:
            log.warning("%s settings found, but this build only has local providers; using local", service)
