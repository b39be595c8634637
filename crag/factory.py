"""Choose and build the providers from settings; the only place that knows them all."""

from __future__ import annotations

import logging
from collections.abc import Callable

from crag.engine import CragEngine, EngineConfig
from crag.generate.extractive import ExtractiveComposer
from crag.grade.local import LocalGrader
from crag.protocols import WebSearch
from crag.rewrite.local import LocalKeywordRewriter
from crag.search.local import LocalRetriever
from crag.search.local_index import BuildReport, LocalIndex
from crag.settings import CragSettings
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


def build_engine(settings: CragSettings, index: LocalIndex) -> CragEngine:
    _warn_unbuilt(settings)
    config = EngineConfig(
        upper=settings.upper_threshold,
        lower=settings.lower_threshold,
        top_k=settings.top_k,
        web_results=settings.web_results,
    )
    return CragEngine(
        rewriter=LocalKeywordRewriter(term_extractor()),
        retriever=LocalRetriever(index),
        grader=LocalGrader(index),
        web=_web_search(settings),
        generator=ExtractiveComposer(index, settings.answer_max_chars),
        config=config,
    )


def _web_search(settings: CragSettings) -> WebSearch:
    key = settings.serpapi_api_key
    if settings.web_provider == "off" or not key.get_secret_value():
        return WebSearchOff()
    return SerpApiSearch(key, settings.serpapi_base_url, settings.serpapi_timeout)


def _warn_unbuilt(settings: CragSettings) -> None:
    # The real-service providers arrive in later work; say so rather than silently ignore keys.
    configured = {
        "LLM": settings.azure_openai_endpoint or settings.openai_api_key.get_secret_value(),
        "Azure AI Search": settings.azure_search_endpoint,
    }
    for service, value in configured.items():
        if value:
            log.warning("%s settings found, but this build only has local providers; using local", service)
