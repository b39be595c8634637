"""Providers and their settings: each real service's settings in its own model (read from the
environment, or given flat to CragSettings), providers chosen by name from one registry per kind,
and a new search provider added as one module plus one registration line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from crag.config import providers
from crag.config.engine_settings import CragSettings
from crag.core.models import Branch
from crag.runtime.factory import search_provider, web_provider
from crag.runtime.handle import EngineHandle
from tests.paths import TEST_DATA

PROVIDERS = TEST_DATA / "providers"


def test_provider_settings_come_from_the_environment_and_from_flat_arguments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AZURE_SEARCH_INDEX", "from-env")
    monkeypatch.setenv("OPENAI_MODEL", "model-from-env")
    settings = CragSettings(AZURE_SEARCH_ENDPOINT="https://x.search.windows.net", SERPAPI_API_KEY="serp")
    # A flat argument sets its field; the rest of the same model still comes from the environment.
    assert settings.azure_search.endpoint == "https://x.search.windows.net"
    assert settings.azure_search.index == "from-env"
    assert settings.llm.openai_model == "model-from-env"
    assert settings.serpapi.configured and settings.serpapi.api_key.get_secret_value() == "serp"


def test_auto_picks_the_first_configured_provider_of_each_kind() -> None:
    assert search_provider(CragSettings())[0] == "local"
    assert web_provider(CragSettings())[0] == "off"
    azure = CragSettings(AZURE_SEARCH_ENDPOINT="https://x.search.windows.net", AZURE_SEARCH_API_KEY="k")
    assert search_provider(azure)[0] == "azure" and not search_provider(azure)[1].USES_LOCAL_INDEX
    assert web_provider(CragSettings(SERPAPI_API_KEY="k"))[0] == "serpapi"
    # Named explicitly, a provider is used even when another one is configured.
    assert web_provider(CragSettings(SERPAPI_API_KEY="k", CRAG_WEB="off"))[0] == "off"


def test_an_unknown_provider_name_is_refused_with_the_known_ones() -> None:
    with pytest.raises(
        ValidationError, match=r"CRAG_SEARCH='elastic' is not a provider here \(auto, azure, local\)"
    ):
        CragSettings(CRAG_SEARCH="elastic")
    with pytest.raises(ValidationError, match="CRAG_WEB=serpapi needs SERPAPI_API_KEY"):
        CragSettings(CRAG_WEB="serpapi")


async def test_a_new_search_provider_is_one_module_and_one_registration_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    faq = tmp_path / "faq.json"
    faq.write_text(
        json.dumps([{"q": "canteen opening hours", "a": "The canteen opens at 11:30 on weekdays."}])
    )
    monkeypatch.syspath_prepend(str(PROVIDERS))
    monkeypatch.setenv("FAQ_SEARCH_FILE", str(faq))
    # The one registration line (crag/retrieval/search/__init__.py), first so that auto picks it when
    # configured:
    monkeypatch.setattr(providers, "SEARCH_PROVIDERS", {"faq": "faq_search", **providers.SEARCH_PROVIDERS})

    # The local grader has no vectors beside another index: its words-only grades may answer here.
    settings = CragSettings(
        CRAG_DOCS_DIR=str(tmp_path / "no-folder"), CRAG_CACHE_TTL=0, CRAG_WORDS_ONLY_ANSWERS=True
    )
    assert settings.search_provider == "auto" and search_provider(settings)[0] == "faq"
    handle = EngineHandle(settings)
    await handle.open()
    try:
        assert handle.engine is not None, handle.error
        status, health = handle.status()
        assert (
            status == 200 and health["index"] == "faq-search" and health["providers"]["search"] == "faq-file"
        )
        result = await handle.engine.run("What are the canteen opening hours?")
        assert result.branch is Branch.CORRECT, [g.score for g in result.graded]
        assert "11:30" in result.answer and result.cited_files == ["faq.json"]
    finally:
        await handle.close()
