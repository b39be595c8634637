"""The Azure AI Search provider: the real SDK against the fake service of tests/fakes/azure_search.py."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from pydantic import SecretStr, ValidationError

from crag.config.azure_search import AzureSearchConfig
from crag.core.models import Chunk
from crag.core.protocols import Retriever
from crag.ingest import azure_index
from crag.ingest.azure_index import (
    AzureSearchIndex,
    build_index,
    embedding_text,
    ensure_index,
    file_fingerprint,
    files_filter,
    make_index_client,
    sync_chunks,
)
from crag.retrieval.search.azure import AzureSearchRetriever, SearchUnavailable
from tests.fakes.azure_search import FakeAzureSearch, ODataError, parse_filter

KEY = "s3cret-admin-key-0123456789"
INDEX = "crag-chunks"
DIMS = 4


class FakeEmbedder:
    """Tiny and deterministic: the same text always gives the same 4 numbers."""

    name = "fake-embedder"

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[list[str]] = []
        self.fail = fail

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        if self.fail:
            raise RuntimeError(f"embedding service down (key {KEY})")
        return [vector(t) for t in texts]

    async def embed_query(self, text: str) -> list[float]:
        return (await self.embed_passages([text]))[0]


def vector(text: str) -> list[float]:
    return [1.0, float(len(text) % 5), float(sum(map(ord, text)) % 7), float(text.count(" "))]


@pytest.fixture
async def fake() -> AsyncIterator[FakeAzureSearch]:
    server = FakeAzureSearch(api_key=KEY)
    await server.start()
    yield server
    await server.stop()


def make_config(fake: FakeAzureSearch, **overrides: Any) -> AzureSearchConfig:
    values: dict[str, Any] = {
        "endpoint": fake.url,
        "index_name": INDEX,
        "api_key": SecretStr(KEY),
        "vector_dimensions": DIMS,
        "retries": 0,
        "timeout_s": 5,
    }
    values.update(overrides)
    return AzureSearchConfig(**values)


def chunk(i: int, file: str = "hr/leave.md", **kw: Any) -> Chunk:
    values: dict[str, Any] = {
        "id": f"c{i:03d}",
        "file": file,
        "title": "有給休暇",
        "headers": ["有給休暇", f"節 {i}"],
        "text": f"passage {i} about paid leave carry over",
        "url": f"https://docs.example/{file}",
        "ordinal": i,
    }
    values.update(kw)
    return Chunk(**values)


def seed(fake: FakeAzureSearch, docs: list[dict[str, Any]]) -> None:
    fake.add_documents(INDEX, docs)


async def ready(fake: FakeAzureSearch, **overrides: Any) -> AzureSearchConfig:
    config = make_config(fake, **overrides)
    await ensure_index(config)
    return config


DOCS = [
    {
        "id": "a1",
        "content": "Paid leave can be carried over for up to 20 days.",
        "title": "Leave policy",
        "file": "hr/leave.md",
        "url": "https://docs.example/hr/leave.md",
        "headers": ["Leave policy", "Carry-over"],
        "ordinal": 3,
        "content_vector": vector("Paid leave can be carried over for up to 20 days."),
    },
    {
        "id": "b1",
        "content": "Remote work is allowed two days a week; leave requests go to your manager.",
        "title": "Remote work",
        "file": "hr/remote.md",
        "url": "https://docs.example/hr/remote.md",
        "headers": ["Remote work"],
        "ordinal": 0,
        "content_vector": vector("Remote work"),
    },
    {
        "id": "c1",
        "content": "Expense reports are due by the fifth.",
        "title": "Expenses",
        "file": "finance/expenses.md",
        "url": "",
        "headers": ["Expenses"],
        "ordinal": 1,
        "content_vector": vector("Expenses"),
    },
]


# -- configuration ---------------------------------------------------------------------------
def test_config_defaults_and_validation() -> None:
    config = AzureSearchConfig(endpoint="https://svc.search.windows.net/", api_key=SecretStr(KEY))
    assert config.endpoint == "https://svc.search.windows.net"
    assert (config.index_name, config.mode, config.semantic) == ("crag-chunks", "keyword", False)
    assert KEY not in repr(config) and KEY not in str(config.model_dump())
    assert config.retrievable_fields() == ["id", "content", "title", "file", "url", "headers", "ordinal"]
    with pytest.raises(ValidationError):
        AzureSearchConfig(endpoint="svc.search.windows.net", api_key=SecretStr(KEY))
    with pytest.raises(ValidationError):
        AzureSearchConfig(endpoint="https://x", api_key=SecretStr(KEY), index_name="Bad_Name")
    with pytest.raises(ValidationError):
        AzureSearchConfig(endpoint="https://x", api_key=SecretStr(KEY), mode="hybrid", vector_dimensions=0)
    with pytest.raises(ValidationError):
        AzureSearchConfig(endpoint="https://x", api_key=SecretStr(KEY), title_field="bad name")
    with pytest.raises(ValidationError):
        AzureSearchConfig(endpoint="https://x", api_key=SecretStr(KEY), content_field="")
    with pytest.raises(ValueError, match="needs an embedder"):
        AzureSearchRetriever(
            AzureSearchConfig(
                endpoint="https://x", api_key=SecretStr(KEY), mode="vector", vector_dimensions=4
            )
        )


# -- index management ------------------------------------------------------------------------
async def test_index_creation_payload(fake: FakeAzureSearch) -> None:
    config = make_config(fake)
    created = await ensure_index(config)
    assert created.name == INDEX

    put = fake.calls(f"/indexes('{INDEX}')", "PUT")
    assert len(put) == 1
    assert put[0].headers["api-key"] == KEY and put[0].query["api-version"]
    body = put[0].body
    fields = {f["name"]: f for f in body["fields"]}
    assert list(fields) == [
        "id",
        "content",
        "title",
        "file",
        "url",
        "headers",
        "ordinal",
        "content_hash",
        "file_chunks",
        "allowed",
        "content_vector",
    ]
    assert fields["id"]["key"] is True and fields["id"]["type"] == "Edm.String"
    assert fields["id"]["filterable"] and fields["id"]["sortable"]  # key-ordered listing
    assert fields["content"]["searchable"] and fields["content"]["analyzer"] == "ja.microsoft"
    assert fields["title"]["searchable"] and fields["title"]["analyzer"] == "ja.microsoft"
    assert fields["headers"]["type"] == "Collection(Edm.String)" and fields["headers"]["searchable"]
    assert fields["file"]["filterable"] and not fields["file"]["searchable"]
    assert fields["content_hash"]["filterable"]
    assert fields["ordinal"]["type"] == "Edm.Int32"
    # Who may read the chunk: filtered with search.in by access trimming.
    assert fields["allowed"]["type"] == "Collection(Edm.String)" and fields["allowed"]["filterable"]
    vec = fields["content_vector"]
    assert vec["type"] == "Collection(Edm.Single)" and vec["dimensions"] == DIMS
    assert vec["searchable"] is True and vec["retrievable"] is False
    assert vec["vectorSearchProfile"] == "crag-vector-profile"

    vector_search = body["vectorSearch"]
    assert vector_search["profiles"] == [{"name": "crag-vector-profile", "algorithm": "crag-hnsw"}]
    (algorithm,) = vector_search["algorithms"]
    assert algorithm["kind"] == "hnsw" and algorithm["name"] == "crag-hnsw"
    assert algorithm["hnswParameters"]["metric"] == "cosine"

    semantic = body["semantic"]
    assert semantic["defaultConfiguration"] == "crag-semantic"
    (sem,) = semantic["configurations"]
    assert sem["name"] == "crag-semantic"
    assert sem["prioritizedFields"]["titleField"] == {"fieldName": "title"}
    assert sem["prioritizedFields"]["prioritizedContentFields"] == [{"fieldName": "content"}]

    # A second run updates in place (same PUT, the service answers 200 instead of 201).
    await ensure_index(config)
    assert len(fake.calls(f"/indexes('{INDEX}')", "PUT")) == 2
    assert fake.indexes[INDEX]["fields"] == body["fields"]


async def test_fake_index_routes_through_the_sdk(fake: FakeAzureSearch) -> None:
    config = make_config(fake, api_version="2024-07-01")
    client = make_index_client(config)
    try:
        created = await client.create_index(build_index(config))  # POST /indexes
        assert created.name == INDEX and fake.requests[-1].path == "/indexes"
        assert fake.requests[-1].query["api-version"] == "2024-07-01"
        fetched = await client.get_index(INDEX)  # GET /indexes('NAME')
        assert [f.name for f in fetched.fields] == [f.name for f in created.fields]
        assert fetched.vector_search is not None and fetched.semantic_search is not None
        with pytest.raises(ResourceExistsError):
            await client.create_index(build_index(config))
        await client.delete_index(INDEX)
        with pytest.raises(ResourceNotFoundError):
            await client.get_index(INDEX)
    finally:
        await client.close()


def test_index_definition_options() -> None:
    config = AzureSearchConfig(
        endpoint="https://x", api_key=SecretStr(KEY), analyzer="standard", vector_dimensions=0, url_field=""
    )
    index = build_index(config)
    names = [f.name for f in index.fields]
    assert "content_vector" not in names and "url" not in names
    assert index.vector_search is None
    assert {f.analyzer_name for f in index.fields if f.searchable} == {"standard.lucene"}


async def test_incompatible_index_change_is_reported(fake: FakeAzureSearch) -> None:
    await ensure_index(make_config(fake))
    with pytest.raises(SearchUnavailable) as caught:
        await ensure_index(make_config(fake, vector_dimensions=8))
    assert caught.value.status_code == 400
    assert "HTTP 400" in str(caught.value) and "dimensions" in str(caught.value)


async def test_upload_batches_and_documents(fake: FakeAzureSearch) -> None:
    config = await ready(fake)
    # Readers as the access rules give them: known (the leave file), unknown (vpn).
    chunks = [chunk(i, allowed=("group-b", "*")) for i in range(5)] + [
        chunk(i, file="it/vpn.md") for i in range(5, 7)
    ]
    vectors = [vector(embedding_text(c)) for c in chunks]
    seen: list[tuple[int, int]] = []
    async with AzureSearchIndex(config) as index:
        sent = await index.upload_chunks(
            chunks,
            vectors,
            {"hr/leave.md": "h-leave", "it/vpn.md": "h-vpn"},
            batch_size=3,
            progress=lambda done, total: seen.append((done, total)),
        )
    assert sent == 7
    bodies = fake.index_bodies()
    assert [len(b["value"]) for b in bodies] == [3, 3, 1]
    assert seen == [(3, 7), (6, 7), (7, 7)]
    first = bodies[0]["value"][0]
    assert first == {
        "@search.action": "mergeOrUpload",
        "id": "c000",
        "content": "passage 0 about paid leave carry over",
        "title": "有給休暇",
        "file": "hr/leave.md",
        "url": "https://docs.example/hr/leave.md",
        "headers": ["有給休暇", "節 0"],
        "ordinal": 0,
        "content_hash": "h-leave",
        "file_chunks": 5,
        "allowed": ["group-b", "*"],
        "content_vector": vectors[0],
    }
    assert bodies[2]["value"][0]["file_chunks"] == 2
    assert bodies[2]["value"][0]["allowed"] == []  # unknown: an empty collection
    assert len(fake.documents[INDEX]) == 7


async def test_upload_without_vectors_clears_them_and_splits_by_size(
    fake: FakeAzureSearch, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = await ready(fake)
    fake.max_request_bytes = 1500  # a 413 here would hit the SDK's broken split-and-retry
    monkeypatch.setattr(azure_index, "MAX_BATCH_BYTES", 700)
    async with AzureSearchIndex(config) as index:
        await index.upload_chunks([chunk(i) for i in range(6)])
    bodies = fake.index_bodies()
    assert len(bodies) > 1 and sum(len(b["value"]) for b in bodies) == 6
    assert all(a["content_vector"] is None and a["content_hash"] == "" for b in bodies for a in b["value"])
    assert len(fake.documents[INDEX]) == 6


async def test_upload_refuses_bad_input(fake: FakeAzureSearch) -> None:
    config = await ready(fake)
    async with AzureSearchIndex(config) as index:
        with pytest.raises(ValueError, match="not a valid Azure AI Search key"):
            await index.upload_chunks([chunk(1, id="a/b")])
        with pytest.raises(ValueError, match="vectors for"):
            await index.upload_chunks([chunk(1)], [])
        with pytest.raises(ValueError, match="dimensions"):
            await index.upload_chunks([chunk(1)], [[1.0, 2.0]])
    assert fake.index_bodies() == []


async def test_rejected_documents_raise(fake: FakeAzureSearch) -> None:
    config = await ready(fake)
    fake.reject_keys = {"c001"}
    async with AzureSearchIndex(config) as index:
        with pytest.raises(SearchUnavailable, match=r"rejected 1 of 3 documents \(first: key 'c001'"):
            await index.upload_chunks([chunk(i) for i in range(3)])


async def test_delete_files_and_indexed_hashes(fake: FakeAzureSearch) -> None:
    config = await ready(fake)
    leave = [chunk(i) for i in range(5)]
    odd_name = "it/a|b O'Brien.md"  # a '|' (search.in delimiter) and a quote in the name
    odd = [chunk(10 + i, file=odd_name) for i in range(2)]
    other = [chunk(20 + i, file="it/vpn.md") for i in range(3)]
    hashes = {"hr/leave.md": "h1", odd_name: "h2", "it/vpn.md": "h3"}
    async with AzureSearchIndex(config, page_size=2) as index:  # small pages: exercise key paging
        await index.upload_chunks(leave + odd + other, file_hashes=hashes)
        assert await index.indexed_file_hashes() == hashes
        assert await index.document_count() == 10

        # An interrupted upload (a chunk missing) or mixed hashes mark a file stale ("").
        del fake.documents[INDEX]["c021"]
        fake.documents[INDEX]["c000"]["content_hash"] = "old"
        assert await index.indexed_file_hashes() == {"hr/leave.md": "", odd_name: "h2", "it/vpn.md": ""}

        fake.requests.clear()
        assert await index.delete_files(["hr/leave.md", odd_name, "missing.md"]) == 7
        assert set(fake.documents[INDEX]) == {"c020", "c022"}
        filters = [b["filter"] for b in fake.search_bodies()]
        assert any("file eq 'it/a|b O''Brien.md'" in f for f in filters)
        assert any("id gt 'c001'" in f for f in filters)  # second page of the listing
        assert all(b["orderby"] == "id asc" and b["search"] == "*" for b in fake.search_bodies())
        deletes = [a for b in fake.index_bodies() for a in b["value"]]
        assert {a["@search.action"] for a in deletes} == {"delete"}
        assert all(set(a) == {"@search.action", "id"} for a in deletes)
        assert await index.delete_files([]) == 0


def test_files_filter_and_fake_odata() -> None:
    assert files_filter("file", ["a.md", "b c.md"]) == "search.in(file, 'a.md|b c.md', '|')"
    assert files_filter("file", ["x|y.md", "it's.md"]) == "file eq 'x|y.md' or file eq 'it''s.md'"
    doc = {"file": "b c.md", "id": "k5", "n": 3}
    assert parse_filter("search.in(file, 'a.md|b c.md', '|')")(doc)
    assert parse_filter("(file eq 'a.md' or n ge 3) and id gt 'k4' and not (id eq 'k9')")(doc)
    assert not parse_filter("search.in(file, 'a.md,b')")(doc)


def test_the_fake_filters_collections_as_the_service_does() -> None:
    fields = {
        "id": {"name": "id", "type": "Edm.String", "filterable": True},
        "content": {"name": "content", "type": "Edm.String", "filterable": False},
        "allowed": {"name": "allowed", "type": "Collection(Edm.String)", "filterable": True},
    }
    readable = "allowed/any(p: search.in(p, '*,u-1,group-a', ','))"
    assert parse_filter(readable, fields)({"allowed": ["group-b", "group-a"]})
    assert not parse_filter(readable, fields)({"allowed": ["group-b"]})
    assert not parse_filter(readable, fields)({"allowed": []}) and not parse_filter(readable, fields)({})
    unknown_too = f"({readable} or not allowed/any())"
    assert parse_filter(unknown_too, fields)({"allowed": None})
    assert not parse_filter(unknown_too, fields)({"allowed": ["!nobody"]})
    assert parse_filter("allowed/all(p: p ne 'x')", fields)({"allowed": ["a", "b"]})
    # What the service refuses (HTTP 400 through the fake's routes): a field that is not filterable
    # or does not exist, a collection compared without any/all, any/all on a plain field.
    for bad in (
        "content eq 'x'",
        "missing eq 'x'",
        "allowed eq 'x'",
        "search.in(allowed, 'a,b', ',')",
        "id/any(p: p eq 'x')",
        "allowed/all()",
    ):
        with pytest.raises(ODataError):
            parse_filter(bad, fields)


async def test_a_reader_filters_in_the_service_before_top(fake: FakeAzureSearch) -> None:
    config = await ready(fake, mode="hybrid", filter="file ne 'finance/expenses.md'")
    seed(fake, [{**DOCS[0], "allowed": ["group-b"]}, {**DOCS[1], "allowed": ["*"]}, DOCS[2]])
    reader = frozenset({"*", "u-1", "group-a"})
    async with AzureSearchRetriever(config, FakeEmbedder()) as retriever:
        query = DOCS[0]["content"]  # a1's own words (and vector): first in both rankings
        hits = await retriever.search(query, 1, reader=reader)
        unfiltered = await retriever.search(query, 1)
    body = fake.search_bodies()[0]
    # The configured filter and the reader's, in the one request; vector queries filtered first.
    assert body["filter"] == (
        "(file ne 'finance/expenses.md') and (allowed/any(p: search.in(p, '*,group-a,u-1', ',')))"
    )
    assert body["vectorFilterMode"] == "preFilter" and body["top"] == 1
    assert "allowed" in body["select"]
    # a1 ranks first but only group-b may read it: top 1 is then the next readable chunk.
    assert [h.chunk.id for h in unfiltered] == ["a1"]
    assert [h.chunk.id for h in hits] == ["b1"] and hits[0].chunk.allowed == ("*",)
    assert "vectorFilterMode" not in fake.search_bodies()[1]  # no reader: the request as before


async def test_sync_chunks_is_incremental(fake: FakeAzureSearch) -> None:
    config = await ready(fake, mode="hybrid")
    embedder = FakeEmbedder()
    v1 = {
        "a.md": file_fingerprint("sha-a", max_chars=1200),
        "b.md": file_fingerprint("sha-b", max_chars=1200),
    }
    chunks = [chunk(i, file="a.md") for i in range(4)] + [chunk(10 + i, file="b.md") for i in range(2)]
    async with AzureSearchIndex(config) as index:
        report = await sync_chunks(index, chunks, v1, embedder, batch_size=4)
        assert report.uploaded_files == ["a.md", "b.md"] and report.uploaded_chunks == 6
        assert sum(len(c) for c in embedder.calls) == 6
        assert fake.documents[INDEX]["c000"]["content_vector"] == vector(embedding_text(chunks[0]))

        # Nothing changed: no embedding, no upload.
        embedder.calls.clear()
        uploads = len(fake.index_bodies())
        report = await sync_chunks(index, chunks, v1, embedder)
        assert report.unchanged_files == ["a.md", "b.md"] and report.uploaded_chunks == 0
        assert embedder.calls == [] and len(fake.index_bodies()) == uploads

        # a.md got shorter, b.md was removed, c.md is new.
        v2 = {"a.md": file_fingerprint("sha-a2", max_chars=1200), "c.md": "sha-c"}
        shorter = [chunk(i, file="a.md", text=f"new {i}") for i in range(2)] + [chunk(30, file="c.md")]
        report = await sync_chunks(index, shorter, v2, embedder)
        assert report.uploaded_files == ["a.md", "c.md"] and report.removed_files == ["b.md"]
        assert report.uploaded_chunks == 3 and report.deleted_chunks == 2 + 2
        assert sorted(fake.documents[INDEX]) == ["c000", "c001", "c030"]
        assert await index.indexed_file_hashes() == v2
    assert file_fingerprint("x", max_chars=1) != file_fingerprint("x", max_chars=2)


# -- retrieval -------------------------------------------------------------------------------
async def test_keyword_search_request_and_results(fake: FakeAzureSearch) -> None:
    config = await ready(fake)
    seed(fake, DOCS)
    azure = AzureSearchRetriever(config)
    retriever: Retriever = azure  # satisfies the engine's protocol
    assert retriever.name == "azure-search-keyword"
    hits = await retriever.search("  paid leave  ", 5)
    (body,) = fake.search_bodies()
    assert body == {"search": "paid leave", "top": 5, "select": "id,content,title,file,url,headers,ordinal"}
    assert [h.chunk.id for h in hits] == ["a1", "b1"]
    first = hits[0]
    assert first.chunk == Chunk(
        id="a1",
        file="hr/leave.md",
        title="Leave policy",
        headers=["Leave policy", "Carry-over"],
        text="Paid leave can be carried over for up to 20 days.",
        url="https://docs.example/hr/leave.md",
        ordinal=3,
    )
    assert first.retrieval_score == 4.0 and hits[1].retrieval_score == 1.0  # the service's @search.score
    assert first.score == 0.0 and first.kept is False
    assert await retriever.search("   ", 5) == [] and len(fake.search_bodies()) == 1
    await azure.close()


async def test_filter_is_applied(fake: FakeAzureSearch) -> None:
    config = await ready(fake, filter="file eq 'hr/remote.md'")
    seed(fake, DOCS)
    async with AzureSearchRetriever(config) as retriever:
        hits = await retriever.search("leave", 3)
    assert fake.search_bodies()[-1]["filter"] == "file eq 'hr/remote.md'"
    assert [h.chunk.id for h in hits] == ["b1"]


async def test_vector_search_request(fake: FakeAzureSearch) -> None:
    config = await ready(fake, mode="vector")
    seed(fake, DOCS)
    embedder = FakeEmbedder()
    async with AzureSearchRetriever(config, embedder) as retriever:
        assert retriever.name == "azure-search-vector"
        hits = await retriever.search("Expenses", 2)
    assert embedder.calls == [["Expenses"]]
    (body,) = fake.search_bodies()
    assert "search" not in body and "queryType" not in body
    assert body["top"] == 2
    assert body["vectorQueries"] == [
        {"kind": "vector", "vector": vector("Expenses"), "k": 2, "fields": "content_vector"}
    ]
    assert hits[0].chunk.id == "c1" and hits[0].retrieval_score == pytest.approx(1.0)
    assert len(hits) == 2


async def test_hybrid_search_request(fake: FakeAzureSearch) -> None:
    config = await ready(fake, mode="hybrid")
    seed(fake, DOCS)
    async with AzureSearchRetriever(config, FakeEmbedder()) as retriever:
        hits = await retriever.search("Remote work", 3)
    (body,) = fake.search_bodies()
    assert body["search"] == "Remote work" and body["top"] == 3
    assert body["vectorQueries"] == [
        {"kind": "vector", "vector": vector("Remote work"), "k": 3, "fields": "content_vector"}
    ]
    assert hits[0].chunk.id == "b1"  # first in both rankings


async def test_semantic_hybrid_search_request(fake: FakeAzureSearch) -> None:
    config = await ready(fake, mode="hybrid", semantic=True, semantic_k_multiplier=4)
    seed(fake, DOCS)
    async with AzureSearchRetriever(config, FakeEmbedder()) as retriever:
        assert retriever.name == "azure-search-hybrid+semantic"
        hits = await retriever.search("paid leave days", 5)
        await retriever.search("paid leave days", 20)
    first, second = fake.search_bodies()
    assert first["queryType"] == "semantic" and first["semanticConfiguration"] == "crag-semantic"
    assert first["search"] == "paid leave days" and first["top"] == 5
    assert first["vectorQueries"][0]["k"] == 20  # top_k x 4: more candidates for the ranker
    assert second["vectorQueries"][0]["k"] == 50  # the ranker reads at most 50
    # retrieval_score is the reranker's score (0-4) when the semantic ranker ran.
    assert hits[0].chunk.id == "a1" and hits[0].retrieval_score == 4.0


async def test_semantic_vector_search_sends_semantic_query(fake: FakeAzureSearch) -> None:
    config = await ready(fake, mode="vector", semantic=True, filter="ordinal ge 1")
    seed(fake, DOCS)
    async with AzureSearchRetriever(config, FakeEmbedder()) as retriever:
        hits = await retriever.search("expense reports", 2)
    (body,) = fake.search_bodies()
    assert "search" not in body
    assert body["semanticQuery"] == "expense reports" and body["queryType"] == "semantic"
    assert body["filter"] == "ordinal ge 1"
    assert {h.chunk.id for h in hits} == {"a1", "c1"}


async def test_missing_optional_fields_are_tolerated(fake: FakeAzureSearch) -> None:
    config = await ready(fake)
    seed(
        fake,
        [{"id": "x1", "content": "bare leave passage"}, {"id": "x2", "content": "leave", "headers": None}],
    )
    async with AzureSearchRetriever(config) as retriever:
        hits = await retriever.search("leave", 5)
    bare = {h.chunk.id: h.chunk for h in hits}
    assert bare["x1"] == Chunk(id="x1", file="", title="x1", headers=[], text="bare leave passage")
    assert bare["x2"].headers == [] and bare["x2"].ordinal == 0

    # An existing index without some fields: map them to "" and they are not selected.
    reduced = make_config(fake, title_field="", url_field="", headers_field="", ordinal_field="")
    seed(fake, [{"id": "y1", "content": "leave only", "file": "a.md"}])
    async with AzureSearchRetriever(reduced) as retriever:
        hits = await retriever.search("only", 5)
    assert fake.search_bodies()[-1]["select"] == "id,content,file"
    assert hits[0].chunk == Chunk(id="y1", file="a.md", title="a.md", text="leave only")


async def test_embedding_failure(fake: FakeAzureSearch) -> None:
    seed_config = await ready(fake, mode="hybrid")
    seed(fake, DOCS)
    async with AzureSearchRetriever(seed_config, FakeEmbedder(fail=True)) as retriever:
        hits = await retriever.search("leave", 3)  # hybrid degrades to keyword only
    assert "vectorQueries" not in fake.search_bodies()[-1] and hits
    vector_config = make_config(fake, mode="vector")
    async with AzureSearchRetriever(vector_config, FakeEmbedder(fail=True)) as retriever:
        with pytest.raises(SearchUnavailable) as caught:
            await retriever.search("leave", 3)
    assert "embedding failed" in str(caught.value) and KEY not in str(caught.value)


async def test_one_connection_is_reused(fake: FakeAzureSearch) -> None:
    config = await ready(fake)
    seed(fake, DOCS)
    async with AzureSearchRetriever(config) as retriever:
        for _ in range(3):
            await retriever.search("leave", 2)
        await asyncio.gather(retriever.search("leave", 2), retriever.search("work", 2))
    peers = [r.peer for r in fake.calls("/docs/search.post.search")]
    assert len(peers) == 5
    assert peers[0] == peers[1] == peers[2]  # sequential searches share one kept-alive connection


# -- failures --------------------------------------------------------------------------------
def assert_safe(error: SearchUnavailable) -> None:
    for text in (str(error), repr(error), str(error.args)):
        assert KEY not in text
    assert error.__cause__ is None and error.__suppress_context__


async def test_service_error_raises_search_unavailable(fake: FakeAzureSearch) -> None:
    config = await ready(fake)
    fake.fail(503)
    async with AzureSearchRetriever(config) as retriever:
        with pytest.raises(SearchUnavailable) as caught:
            await retriever.search("leave", 3)
    assert caught.value.status_code == 503
    assert "HTTP 503" in str(caught.value)
    assert_safe(caught.value)
    async with AzureSearchIndex(config) as index:
        with pytest.raises(SearchUnavailable, match="upload failed"):
            await index.upload_chunks([chunk(1)])
        with pytest.raises(SearchUnavailable, match="listing failed"):
            await index.indexed_file_hashes()


async def test_retries_then_succeeds(fake: FakeAzureSearch) -> None:
    config = await ready(fake, retries=1)
    seed(fake, DOCS)
    fake.requests.clear()
    fake.fail(503, times=1)
    async with AzureSearchRetriever(config) as retriever:
        hits = await retriever.search("leave", 3)
    assert hits and len(fake.search_bodies()) == 2


async def test_wrong_key_raises_search_unavailable(fake: FakeAzureSearch) -> None:
    await ready(fake)
    wrong = make_config(fake, api_key=SecretStr("wrong-" + KEY))
    async with AzureSearchRetriever(wrong) as retriever:
        with pytest.raises(SearchUnavailable) as caught:
            await retriever.search("leave", 3)
    assert caught.value.status_code == 403
    assert "wrong-" not in str(caught.value)
    assert_safe(caught.value)


async def test_missing_index_raises_search_unavailable(fake: FakeAzureSearch) -> None:
    async with AzureSearchRetriever(make_config(fake, index_name="nope")) as retriever:
        with pytest.raises(SearchUnavailable, match="HTTP 404") as caught:
            await retriever.search("leave", 3)
    assert "nope" in str(caught.value)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_unreachable_endpoint_raises_search_unavailable() -> None:
    config = AzureSearchConfig(
        endpoint=f"http://127.0.0.1:{free_port()}", api_key=SecretStr(KEY), retries=0, timeout_s=2
    )
    async with AzureSearchRetriever(config) as retriever:
        with pytest.raises(SearchUnavailable, match="unreachable") as caught:
            await retriever.search("leave", 3)
    assert caught.value.status_code is None
    assert_safe(caught.value)
    with pytest.raises(SearchUnavailable, match="unreachable"):
        await ensure_index(config)


async def test_slow_service_times_out(fake: FakeAzureSearch) -> None:
    config = await ready(fake, timeout_s=0.2)
    fake.delay_s = 1.0
    async with AzureSearchRetriever(config) as retriever:
        with pytest.raises(SearchUnavailable, match="timed out") as caught:
            await retriever.search("leave", 3)
    assert_safe(caught.value)
