"""Every branch through the real client libraries, against fake OpenAI, Azure AI Search and SerpAPI
servers on 127.0.0.1, and every failure mode degrading with a notice on the card."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cards.answer_card import answer_card
from crag.config.engine_settings import CragSettings
from crag.core.models import Branch, WebStatus
from crag.engine import CragEngine
from crag.eval.fixture_web import FakeSerpApi
from crag.ingest.azure_target import ingest_azure
from crag.runtime.factory import build_engine
from tests.fakes.azure_search import FakeAzureSearch
from tests.fakes.bot_connector import card_text
from tests.fakes.openai_api import FakeOpenAI
from tests.paths import SAMPLE_DOCS

SERP_FIXTURES = {
    "q1": {
        "question": "world cup",
        "serpapi": {
            "organic_results": [
                {
                    "title": "Web page",
                    "link": "https://web.example/page",
                    "snippet": "The answer from the web.",
                }
            ]
        },
    }
}


class Services:
    def __init__(self) -> None:
        self.llm = FakeOpenAI()
        self.search = FakeAzureSearch()
        self.serp = FakeSerpApi(SERP_FIXTURES)

    def settings(self, **extra: Any) -> CragSettings:
        env: dict[str, Any] = {
            "AZURE_OPENAI_ENDPOINT": self.llm.url,
            "AZURE_OPENAI_API_KEY": "aoai-key",
            "AZURE_OPENAI_DEPLOYMENT": "chat",
            "AZURE_OPENAI_EMBEDDING_DEPLOYMENT": "embed",
            "AZURE_SEARCH_ENDPOINT": self.search.url,
            "AZURE_SEARCH_API_KEY": self.search.api_key,
            "AZURE_SEARCH_INDEX": "crag-test",
            "AZURE_SEARCH_MODE": "hybrid",
            "AZURE_SEARCH_SEMANTIC": True,
            "AZURE_SEARCH_VECTOR_DIMENSIONS": 8,
            "SERPAPI_API_KEY": "serp-key",
            "SERPAPI_BASE_URL": self.serp.url,
            "CRAG_LLM_MAX_RETRIES": 0,
            "AZURE_SEARCH_TIMEOUT": 2,
        }
        env.update(extra)
        return CragSettings(**env)


@pytest.fixture
async def services(tmp_path: Path) -> AsyncIterator[Services]:
    s = Services()
    await s.llm.start()
    await s.search.start()
    await s.serp.start()
    assert await ingest_azure(SAMPLE_DOCS, s.settings()) == 0
    yield s
    await s.llm.stop()
    await s.search.stop()
    await s.serp.stop()


async def _run(engine: CragEngine, question: str) -> Any:
    try:
        return await engine.run(question)
    finally:
        await engine.close()


async def test_ingest_filled_the_azure_index(services: Services) -> None:
    index = services.search.indexes["crag-test"]
    assert any(f["name"] == "content_vector" for f in index["fields"]) and index.get("semantic")
    uploads = services.search.index_bodies()
    assert uploads
    docs = [a for body in uploads for a in body["value"]]
    assert {d["file"] for d in docs} == {p.name for p in SAMPLE_DOCS.iterdir() if p.suffix in (".md", ".txt")}
    assert all(len(d["content_vector"]) == 8 for d in docs)  # embedded by the fake Azure OpenAI
    embeds = [r for r in services.llm.requests if r["kind"] == "embeddings"]
    assert embeds and embeds[0]["path"] == "/openai/deployments/embed/embeddings"
    # A second run uploads nothing: every file is unchanged.
    before = len(services.search.calls("/docs/search.index"))
    assert await ingest_azure(SAMPLE_DOCS, services.settings()) == 0
    assert len(services.search.calls("/docs/search.index")) == before


async def test_correct_branch(services: Services) -> None:
    services.llm.grade_override = lambda q, p: 0.95 if "4,000" in p else 0.1
    result = await _run(build_engine(services.settings(), None), "What is the monthly remote work allowance?")
    assert result.branch is Branch.CORRECT
    # The speculative web search was started during grading, then dropped: no web sources.
    assert result.web.status is WebStatus.NOT_NEEDED and all(c.kind == "document" for c in result.citations)
    body = services.search.search_bodies()[-1]
    assert body["queryType"] == "semantic" and body["vectorQueries"][0]["kind"] == "vector"
    assert result.providers["search"] == "azure-search-hybrid+semantic"
    assert result.cited_files == ["remote_work_policy.md"]
    assert services.llm.chats("grade") and services.llm.chats("answer")


async def test_correct_branch_without_speculation_never_searches_the_web(services: Services) -> None:
    services.llm.grade_override = lambda q, p: 0.95 if "4,000" in p else 0.1
    settings = services.settings(CRAG_SPECULATIVE_WEB=False)
    result = await _run(build_engine(settings, None), "What is the monthly remote work allowance?")
    assert result.branch is Branch.CORRECT and services.serp.queries == []


async def test_ambiguous_branch(services: Services) -> None:
    services.llm.grade_override = lambda q, p: 0.5 if "4,000" in p else 0.1
    result = await _run(build_engine(services.settings(), None), "What is the monthly remote work allowance?")
    assert result.branch is Branch.AMBIGUOUS
    assert result.web.status is WebStatus.OK and services.serp.queries
    kinds = {c.kind for c in result.citations} | {"web" for w in result.web.results}
    assert "web" in kinds and result.kept


async def test_incorrect_branch(services: Services) -> None:
    services.llm.grade_override = lambda q, p: 0.0
    result = await _run(build_engine(services.settings(), None), "Who won the world cup?")
    assert result.branch is Branch.INCORRECT and result.kept == []
    assert services.serp.queries and result.web.results[0].url == "https://web.example/page"
    assert "From the web" in card_text(answer_card(result, "en"))


async def test_search_outage_goes_to_the_web_with_a_notice(services: Services) -> None:
    services.search.fail(503)
    result = await _run(build_engine(services.settings(), None), "What is the monthly remote work allowance?")
    assert result.notices == ["search_failed"]
    assert result.branch is Branch.INCORRECT and result.web.status is WebStatus.OK
    text = card_text(answer_card(result, "en"))
    assert "document search failed" in text and services.search.api_key not in json.dumps(answer_card(result))


async def test_web_outage_answers_from_documents_with_a_notice(services: Services) -> None:
    services.llm.grade_override = lambda q, p: 0.5 if "4,000" in p else 0.1
    settings = services.settings(SERPAPI_BASE_URL="http://127.0.0.1:9", SERPAPI_TIMEOUT=1)
    result = await _run(build_engine(settings, None), "What is the monthly remote work allowance?")
    assert result.branch is Branch.AMBIGUOUS and result.web.status is WebStatus.FAILED
    assert result.cited_files == ["remote_work_policy.md"]
    assert "Web search failed" in card_text(answer_card(result, "en"))


async def test_llm_outage_uses_local_components_over_azure_search(services: Services) -> None:
    services.llm.failures = ["500"] * 100
    settings = services.settings(AZURE_SEARCH_MODE="keyword", AZURE_SEARCH_SEMANTIC=False)
    result = await _run(build_engine(settings, None), "remote work allowance monthly")
    assert "llm_fallback" in result.notices
    assert result.graded and result.answer
    assert "language model was unavailable" in card_text(answer_card(result, "en"))


def _mixed_folder(root: Path) -> Path:
    from tests.crag.ingest.formats.test_office_formats import (
        make_csv,
        make_docx,
        make_html,
        make_pdf,
        make_pptx,
        make_xlsx,
    )

    root.mkdir()
    for maker, name in (
        (make_docx, "handbook.docx"),
        (make_pptx, "townhall.pptx"),
        (make_xlsx, "budget.xlsx"),
        (make_csv, "contacts.csv"),
        (make_html, "intranet.html"),
        (make_pdf, "policy.pdf"),
    ):
        maker(root / name)
    (root / "notes.md").write_text("# Notes\n\n## Parking\n\nBicycle parking is on B1.", "utf-8")
    (root / "plain.txt").write_text("Plain text\n\nThe cafeteria opens at 11:30.", "utf-8")
    (root / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip")
    return root


async def test_ingest_cli_fills_local_and_azure_indexes_from_mixed_formats(
    services: Services, tmp_path: Path
) -> None:
    import os
    import subprocess
    import sys

    from tests.paths import ROOT

    folder = _mixed_folder(tmp_path / "mixed")
    expected = {
        "handbook.docx",
        "townhall.pptx",
        "budget.xlsx",
        "contacts.csv",
        "intranet.html",
        "policy.pdf",
    }
    expected |= {"notes.md", "plain.txt"}

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "OPENAI_", "SERPAPI_"))}
    local = subprocess.run(
        [sys.executable, "-m", "crag.cli.ingest", str(folder), "--index-dir", str(tmp_path / "idx")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert local.returncode == 0, local.stderr
    assert "indexed 8 documents" in local.stdout and "skipped 1 file(s)" in local.stdout
    assert "broken.docx" in local.stdout
    chunks = [
        json.loads(line)["file"]
        for line in (tmp_path / "idx" / "chunks.jsonl").read_text("utf-8").splitlines()
    ]
    assert set(chunks) == expected

    assert await ingest_azure(folder, services.settings(AZURE_SEARCH_INDEX="crag-mixed")) == 0
    docs = services.search.documents["crag-mixed"].values()
    assert {d["file"] for d in docs} == expected


async def test_bot_answers_through_real_clients_and_fakes(
    services: Services, tmp_path: Path, connector: Any
) -> None:
    """The real app (`python app.py`) on fake Azure OpenAI, Azure AI Search and SerpAPI."""
    import aiohttp

    from tests.fakes.bot_connector import card_of, find_by_id, make_activity
    from tests.servers.app_process import AppProcess

    settings = services.settings()
    env = {
        "AZURE_OPENAI_ENDPOINT": services.llm.url,
        "AZURE_OPENAI_API_KEY": "aoai-key",
        "AZURE_OPENAI_DEPLOYMENT": "chat",
        "AZURE_OPENAI_EMBEDDING_DEPLOYMENT": "embed",
        "AZURE_SEARCH_ENDPOINT": services.search.url,
        "AZURE_SEARCH_API_KEY": services.search.api_key,
        "AZURE_SEARCH_INDEX": settings.azure_search.index,
        "AZURE_SEARCH_MODE": "hybrid",
        "AZURE_SEARCH_VECTOR_DIMENSIONS": "8",
        "SERPAPI_API_KEY": "serp-key",
        "SERPAPI_BASE_URL": services.serp.url,
    }
    app = AppProcess(tmp_path, SAMPLE_DOCS, **env)
    app.start()
    try:
        assert app.health()["index"] == "azure-search"
        services.llm.grade_override = lambda q, p: 0.0  # nothing relevant: the web branch
        msg = make_activity(connector.url, text="Who won the world cup?")
        async with aiohttp.ClientSession() as session, session.post(app.url + "/api/messages", json=msg) as r:
            assert r.status == 201
        card = next(card_of(a) for a in connector.activities if card_of(a))
        assert card is not None
        assert "From the web" in find_by_id(card, "branch")["text"]  # type: ignore[index]
        assert "https://web.example/page" in find_by_id(card, "web_urls")["text"]  # type: ignore[index]
        assert services.search.search_bodies() and services.serp.queries and services.llm.chats("answer")
        assert "aoai-key" not in app.log() and "serp-key" not in app.log()
    finally:
        app.stop()
