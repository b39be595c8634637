"""Create the Azure AI Search index and keep its chunks in step with a folder of documents.

`ensure_index` creates the index or updates it in place (new fields, vector and semantic settings).
`AzureSearchIndex` uploads chunks (merge-or-upload, in batches under the service's size limits),
deletes the chunks of given files, and reports which file versions are indexed so that an ingest run
skips unchanged files. `sync_chunks` does a whole incremental ingest with those pieces.

Each chunk carries its file's content hash and the number of chunks of that file: a file whose upload
was interrupted (fewer chunks than announced, or mixed hashes) is reported as stale and uploaded again.
Listing walks the index in key order with a range filter (`id gt 'last'`), so it is not limited by the
service's 100,000 $skip cap.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from azure.core.credentials import AzureKeyCredential
from azure.core.credentials_async import AsyncTokenCredential
from azure.search.documents.aio import SearchClient
from azure.search.documents.indexes.aio import SearchIndexClient
from azure.search.documents.indexes.models import (
    HnswAlgorithmConfiguration,
    HnswParameters,
    SearchField,
    SearchFieldDataType,
    SearchIndex,
    SemanticConfiguration,
    SemanticField,
    SemanticPrioritizedFields,
    SemanticSearch,
    VectorSearch,
    VectorSearchProfile,
)

from crag.config.azure_search import AzureSearchConfig
from crag.core.models import Chunk
from crag.core.protocols import Embedder
from crag.outbound.entra_tokens import async_credential
from crag.retrieval.search.azure import (
    SEARCH_AUDIENCE,
    SearchUnavailable,
    client_options,
    guarded,
    make_search_client,
    odata_string,
    stored_principals,
)

log = logging.getLogger(__name__)

VECTOR_PROFILE = "crag-vector-profile"
VECTOR_ALGORITHM = "crag-hnsw"
# The service takes at most 1000 actions and 16 MB per indexing request. Batches are cut well below
# the byte limit: the SDK's own split-on-413 fallback is broken in 12.0.0 (see upload_chunks).
MAX_BATCH_DOCS = 1000
MAX_BATCH_BYTES = 8_000_000
# Files named per listing query (each becomes one value of a search.in filter).
FILES_PER_QUERY = 50
_KEY = re.compile(r"^[A-Za-z0-9_\-=]{1,1024}$")

Progress = Callable[[int, int], None]


def build_index(config: AzureSearchConfig) -> SearchIndex:
    """The index definition: mapped fields, HNSW vector profile, semantic configuration."""
    c = config
    analyzer = "standard.lucene" if c.analyzer == "standard" else c.analyzer
    string = SearchFieldDataType.STRING.value
    fields = [
        _field(c.id_field, string, key=True, filterable=True, sortable=True),
        _field(c.content_field, string, searchable=True, analyzer_name=analyzer),
    ]
    if c.title_field:
        fields.append(_field(c.title_field, string, searchable=True, analyzer_name=analyzer))
    if c.file_field:
        fields.append(_field(c.file_field, string, filterable=True, facetable=True))
    if c.url_field:
        fields.append(_field(c.url_field, string))
    if c.headers_field:
        fields.append(
            _field(c.headers_field, f"Collection({string})", searchable=True, analyzer_name=analyzer)
        )
    if c.ordinal_field:
        fields.append(
            _field(c.ordinal_field, SearchFieldDataType.INT32.value, filterable=True, sortable=True)
        )
    if c.content_hash_field:
        fields.append(_field(c.content_hash_field, string, filterable=True))
    if c.file_chunks_field:
        fields.append(_field(c.file_chunks_field, SearchFieldDataType.INT32.value))
    if c.allowed_field:
        # Filtered with allowed/any(p: search.in(p, '…', ',')) by access trimming
        # (crag/retrieval/search/azure.py).
        fields.append(_field(c.allowed_field, f"Collection({string})", filterable=True))
    vector_search = None
    if c.has_vectors:
        fields.append(
            _field(
                c.vector_field,
                f"Collection({SearchFieldDataType.SINGLE.value})",
                searchable=True,
                retrievable=False,
                vector_search_dimensions=c.vector_dimensions,
                vector_search_profile_name=VECTOR_PROFILE,
            )
        )
        vector_search = VectorSearch(
            algorithms=[
                HnswAlgorithmConfiguration(
                    name=VECTOR_ALGORITHM,
                    parameters=HnswParameters(m=4, ef_construction=400, ef_search=500, metric="cosine"),
                )
            ],
            profiles=[
                VectorSearchProfile(name=VECTOR_PROFILE, algorithm_configuration_name=VECTOR_ALGORITHM)
            ],
        )
    prioritized = SemanticPrioritizedFields(
        title_field=SemanticField(field_name=c.title_field) if c.title_field else None,
        content_fields=[SemanticField(field_name=c.content_field)],
        keywords_fields=[SemanticField(field_name=c.headers_field)] if c.headers_field else None,
    )
    semantic = SemanticSearch(
        default_configuration_name=c.semantic_configuration,
        configurations=[SemanticConfiguration(name=c.semantic_configuration, prioritized_fields=prioritized)],
    )
    return SearchIndex(
        name=c.index_name, fields=fields, vector_search=vector_search, semantic_search=semantic
    )


def _field(name: str, type_: str, **flags: Any) -> SearchField:
    attributes: dict[str, Any] = {
        "key": False,
        "retrievable": True,
        "searchable": False,
        "filterable": False,
        "sortable": False,
        "facetable": False,
    }
    attributes.update(flags)
    return SearchField(name=name, type=type_, **attributes)


class _KeylessIndexClient(SearchIndexClient):
    """A SearchIndexClient signing in with its own Entra credential, which it closes with itself."""

    def __init__(self, endpoint: str, credential: AsyncTokenCredential, **options: Any) -> None:
        super().__init__(endpoint, credential, audience=SEARCH_AUDIENCE, **options)
        self._own_credential = credential

    async def close(self) -> None:
        await super().close()
        await self._own_credential.close()


def make_index_client(config: AzureSearchConfig, **transport: Any) -> SearchIndexClient:
    """With the key when one is set, else an Entra token (in Azure, the indexing job's identity,
    which alone holds the index-writer roles)."""
    key = config.api_key.get_secret_value()
    if key:
        credential = AzureKeyCredential(key)
        return SearchIndexClient(config.endpoint, credential, **client_options(config), **transport)
    return _KeylessIndexClient(config.endpoint, async_credential(), **client_options(config), **transport)


async def ensure_index(config: AzureSearchConfig, client: SearchIndexClient | None = None) -> SearchIndex:
    """Create the index, or update it in place (the service refuses incompatible changes such as a
    new analyzer or new vector dimensions on an existing field: SearchUnavailable says why)."""
    own = client is None
    index_client = client or make_index_client(config)
    definition = build_index(config)
    try:
        result: SearchIndex = await guarded(
            lambda: index_client.create_or_update_index(definition), config, "index update", None
        )
    finally:
        if own:
            await index_client.close()
    log.info("Azure AI Search index %s is ready (%d fields)", config.index_name, len(definition.fields))
    return result


def file_fingerprint(file_sha256: str, **shaping: object) -> str:
    """The content_hash to store for a file: its bytes' hash plus everything else that shapes its chunks
    and vectors (chunk size, link base URL, embedding model...), so that changing any re-uploads it."""
    extra = json.dumps(shaping, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(f"{file_sha256}\x00{extra}".encode()).hexdigest()


def embedding_text(chunk: Chunk) -> str:
    """What is embedded for a chunk: its title and section path, then its text (as the local index
    makes the headers searchable, so questions naming a section's subject find its body)."""
    return "\n".join([*dict.fromkeys([chunk.title, *chunk.headers]), chunk.text])


def files_filter(field_name: str, files: Sequence[str]) -> str:
    """An OData filter matching any of files exactly."""
    if not any("|" in f for f in files):
        return f"search.in({field_name}, {odata_string('|'.join(files))}, '|')"
    return " or ".join(f"{field_name} eq {odata_string(f)}" for f in files)


def _check_key(chunk_id: str) -> None:
    if not _KEY.match(chunk_id):
        raise ValueError(
            f"chunk id {chunk_id!r} is not a valid Azure AI Search key "
            "(letters, digits, '_', '-' or '=', at most 1024 characters)"
        )


@dataclass(frozen=True)
class SyncReport:
    uploaded_files: list[str] = field(default_factory=list)
    unchanged_files: list[str] = field(default_factory=list)
    removed_files: list[str] = field(default_factory=list)
    uploaded_chunks: int = 0
    deleted_chunks: int = 0


class AzureSearchIndex:
    """Upload, delete and list the chunks of one index. One pair of SDK clients, closed by close()."""

    def __init__(
        self,
        config: AzureSearchConfig,
        *,
        page_size: int = 1000,
        search_client: SearchClient | None = None,
        index_client: SearchIndexClient | None = None,
    ) -> None:
        if not 1 <= page_size <= 1000:
            raise ValueError("page_size must be between 1 and 1000")
        self.config = config
        self._page = page_size
        self._search = search_client or make_search_client(config)
        self._indexes = index_client or make_index_client(config)

    async def close(self) -> None:
        await self._search.close()
        await self._indexes.close()

    async def __aenter__(self) -> AzureSearchIndex:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def ensure_index(self) -> SearchIndex:
        return await ensure_index(self.config, self._indexes)

    async def document_count(self) -> int:
        return await guarded(self._search.get_document_count, self.config, "count", None)

    # -- upload ---------------------------------------------------------------------------------
    async def upload_chunks(
        self,
        chunks: Sequence[Chunk],
        vectors: Sequence[Sequence[float]] | None = None,
        file_hashes: Mapping[str, str] | None = None,
        batch_size: int = 500,
        progress: Progress | None = None,
    ) -> int:
        """Merge-or-upload chunks (all chunks of each file they contain: the per-file chunk count is
        stored with them). vectors: one per chunk, or None to store none (a stale one is cleared).
        file_hashes: {file: content hash} stored on each chunk. Returns the number of chunks sent."""
        if vectors is not None and len(vectors) != len(chunks):
            raise ValueError(f"{len(vectors)} vectors for {len(chunks)} chunks")
        if vectors is not None and not self.config.has_vectors:
            raise ValueError("vectors given, but the index configuration has no vector field")
        for chunk in chunks:
            _check_key(chunk.id)
        per_file = Counter(c.file for c in chunks)
        hashes = file_hashes or {}
        total = len(chunks)
        sent = 0
        for batch in self._batches(chunks, vectors, hashes, per_file, batch_size):
            await self._index_batch(batch, delete=False)
            sent += len(batch)
            log.debug("uploaded %d/%d chunks", sent, total)
            if progress:
                progress(sent, total)
        return sent

    def _batches(
        self,
        chunks: Sequence[Chunk],
        vectors: Sequence[Sequence[float]] | None,
        hashes: Mapping[str, str],
        per_file: Mapping[str, int],
        batch_size: int,
    ) -> Iterable[list[dict[str, Any]]]:
        limit = max(1, min(batch_size, MAX_BATCH_DOCS))
        batch: list[dict[str, Any]] = []
        size = 0
        for i, chunk in enumerate(chunks):
            vector = None if vectors is None else self._vector(vectors[i])
            doc = self._document(chunk, vector, hashes.get(chunk.file, ""), per_file[chunk.file])
            doc_bytes = len(json.dumps(doc, ensure_ascii=False).encode())
            if batch and (len(batch) >= limit or size + doc_bytes > MAX_BATCH_BYTES):
                yield batch
                batch, size = [], 0
            batch.append(doc)
            size += doc_bytes
        if batch:
            yield batch

    def _vector(self, vector: Sequence[float]) -> list[float]:
        if len(vector) != self.config.vector_dimensions:
            raise ValueError(
                f"a vector has {len(vector)} dimensions, the index expects {self.config.vector_dimensions}"
            )
        return [float(x) for x in vector]

    def _document(
        self, chunk: Chunk, vector: list[float] | None, file_hash: str, file_chunks: int
    ) -> dict[str, Any]:
        c = self.config
        doc: dict[str, Any] = {c.id_field: chunk.id, c.content_field: chunk.text}
        optional: dict[str, Any] = {
            c.title_field: chunk.title,
            c.file_field: chunk.file,
            c.url_field: chunk.url,
            c.headers_field: list(chunk.headers),
            c.ordinal_field: chunk.ordinal,
            c.content_hash_field: file_hash,
            c.file_chunks_field: file_chunks,
            c.allowed_field: stored_principals(chunk.allowed),
        }
        doc.update({name: value for name, value in optional.items() if name})
        if c.has_vectors:
            # Always set (None clears it): merge would otherwise keep the vector of the old content.
            doc[c.vector_field] = vector
        return doc

    async def _index_batch(self, batch: list[dict[str, Any]], delete: bool) -> None:
        # Sent through the per-action helpers (a single request each). In azure-search-documents 12.0.0
        # the SDK's split-and-retry on HTTP 413 passes a wrong keyword for the second half and fails
        # with TypeError after uploading the first, which is why batches are kept under the byte limit.
        call = self._search.delete_documents if delete else self._search.merge_or_upload_documents
        label = "delete" if delete else "upload"
        results = await guarded(lambda: call(documents=batch), self.config, label, None)
        failed = [r for r in results if not r.succeeded]
        if failed:
            first = failed[0]
            raise SearchUnavailable(
                f"Azure AI Search rejected {len(failed)} of {len(batch)} documents "
                f"(first: key {first.key!r}, HTTP {first.status_code}: {(first.error_message or '')[:200]})",
                first.status_code,
            )

    # -- delete ---------------------------------------------------------------------------------
    async def delete_files(self, files: Iterable[str], batch_size: int = 500) -> int:
        """Delete every chunk whose file is one of files. Returns the number of chunks deleted."""
        ids = [i for found in (await self.chunk_ids(files)).values() for i in sorted(found)]
        return await self.delete_ids(ids, batch_size)

    async def delete_ids(self, ids: Sequence[str], batch_size: int = 500) -> int:
        limit = max(1, min(batch_size, MAX_BATCH_DOCS))
        for start in range(0, len(ids), limit):
            batch = [{self.config.id_field: i} for i in ids[start : start + limit]]
            await self._index_batch(batch, delete=True)
        return len(ids)

    # -- listing --------------------------------------------------------------------------------
    async def chunk_ids(self, files: Iterable[str]) -> dict[str, set[str]]:
        """{file: ids of its chunks in the index} for the given files (files with none are left out)."""
        file_field = self._require(self.config.file_field, "file_field")
        names = sorted(set(files))
        found: dict[str, set[str]] = defaultdict(set)
        for start in range(0, len(names), FILES_PER_QUERY):
            group = names[start : start + FILES_PER_QUERY]
            async for doc in self._scan(files_filter(file_field, group), [file_field]):
                found[str(doc.get(file_field) or "")].add(str(doc[self.config.id_field]))
        return dict(found)

    async def indexed_file_hashes(self) -> dict[str, str]:
        """{file: content hash} of every file in the index. A file whose chunks disagree (mixed hashes,
        or fewer chunks than its chunk count says: an interrupted upload) maps to "" (stale)."""
        c = self.config
        file_field = self._require(c.file_field, "file_field")
        hash_field = self._require(c.content_hash_field, "content_hash_field")
        select = [file_field, hash_field, *([c.file_chunks_field] if c.file_chunks_field else [])]
        hashes: dict[str, set[str]] = defaultdict(set)
        counts: Counter[str] = Counter()
        expected: dict[str, set[int]] = defaultdict(set)
        async for doc in self._scan(None, select):
            name = str(doc.get(file_field) or "")
            hashes[name].add(str(doc.get(hash_field) or ""))
            counts[name] += 1
            announced = doc.get(c.file_chunks_field) if c.file_chunks_field else None
            if isinstance(announced, int):
                expected[name].add(announced)
        result: dict[str, str] = {}
        for name, seen in hashes.items():
            complete = not expected[name] or expected[name] == {counts[name]}
            result[name] = next(iter(seen)) if len(seen) == 1 and complete else ""
        return result

    async def _scan(self, filter_: str | None, select: list[str]) -> AsyncIterator[dict[str, Any]]:
        """Every document matching filter_, in key order, a page at a time (range filter on the key)."""
        id_field = self.config.id_field
        fields = list(dict.fromkeys([id_field, *select]))
        last: str | None = None
        while True:
            clauses = [f"({filter_})"] if filter_ else []
            if last is not None:
                clauses.append(f"{id_field} gt {odata_string(last)}")
            page = await self._page_after(" and ".join(clauses) or None, fields)
            for doc in page:
                yield doc
            if len(page) < self._page:
                return
            last = str(page[-1][id_field])

    async def _page_after(self, filter_: str | None, select: list[str]) -> list[dict[str, Any]]:
        async def run() -> list[dict[str, Any]]:
            results = await self._search.search(
                search_text="*",
                filter=filter_,
                order_by=[f"{self.config.id_field} asc"],
                select=select,
                top=self._page,
            )
            docs: list[dict[str, Any]] = []
            async for doc in results:
                docs.append(doc)
                if len(docs) >= self._page:
                    break
            return docs

        return await guarded(run, self.config, "listing", None)

    @staticmethod
    def _require(name: str, setting: str) -> str:
        if not name:
            raise ValueError(f"this operation needs {setting} to be mapped")
        return name


async def sync_chunks(
    index: AzureSearchIndex,
    chunks: Sequence[Chunk],
    file_hashes: Mapping[str, str],
    embedder: Embedder | None = None,
    *,
    batch_size: int = 500,
    embed_batch_size: int = 16,
    progress: Callable[[str, int, int], None] | None = None,
) -> SyncReport:
    """Make the index hold exactly these chunks: chunks of the current files (all of them, changed or
    not) and {file: fingerprint} of those files. Unchanged files are skipped (no embedding, no upload),
    files no longer present are deleted, and changed files are uploaded then cleared of leftover chunks
    (a file that got shorter keeps no old tail). progress(stage, done, total), stage in embed/upload."""
    indexed = await index.indexed_file_hashes()
    removed = sorted(set(indexed) - set(file_hashes))
    changed = sorted(f for f, h in file_hashes.items() if not h or indexed.get(f) != h)
    unchanged = sorted(set(file_hashes) - set(changed))
    changed_set = set(changed)
    todo = [c for c in chunks if c.file in changed_set]

    vectors: list[list[float]] | None = None
    if embedder is not None and todo:
        vectors = []
        for start in range(0, len(todo), embed_batch_size):
            texts = [embedding_text(c) for c in todo[start : start + embed_batch_size]]
            vectors.extend(await embedder.embed_passages(texts))
            if progress:
                progress("embed", len(vectors), len(todo))

    def upload_progress(done: int, total: int) -> None:
        if progress:
            progress("upload", done, total)

    uploaded = await index.upload_chunks(todo, vectors, file_hashes, batch_size, upload_progress)
    deleted = await index.delete_files(removed, batch_size) if removed else 0
    previously = [f for f in changed if f in indexed]
    if previously:
        current = {c.id for c in todo}
        found = await index.chunk_ids(previously)
        leftovers = sorted(i for ids in found.values() for i in ids if i not in current)
        deleted += await index.delete_ids(leftovers, batch_size)
    return SyncReport(
        uploaded_files=changed,
        unchanged_files=unchanged,
        removed_files=removed,
        uploaded_chunks=uploaded,
        deleted_chunks=deleted,
    )
