"""Retriever over an Azure AI Search index, with the async SDK client.

Keyword (full text), vector (the query embedded by an Embedder) or hybrid (both, fused by the service)
retrieval, optionally reranked by the semantic ranker. One SearchClient is kept for the provider's
lifetime so its aiohttp session and connections are reused; `close()` releases them.

Every failure of the service (HTTP errors, connection errors, timeouts, unreadable responses) becomes a
`SearchUnavailable` whose message names the cause but never holds the API key; the engine degrades on it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from azure.core.credentials import AzureKeyCredential
from azure.core.credentials_async import AsyncTokenCredential
from azure.core.exceptions import (
    AzureError,
    DeserializationError,
    HttpResponseError,
    ServiceRequestError,
    ServiceRequestTimeoutError,
    ServiceResponseError,
    ServiceResponseTimeoutError,
)
from azure.search.documents.aio import SearchClient
from azure.search.documents.models import VectorizedQuery

from crag.config.azure_search import AzureSearchConfig
from crag.config.engine_settings import CragSettings
from crag.core.access import Reader, may_read, normalize
from crag.core.models import Chunk, GradedChunk
from crag.core.protocols import Embedder, SearchBuild
from crag.outbound.entra_tokens import async_credential
from crag.providers.llm.client import LlmClient
from crag.retrieval.embed.llm import LlmEmbedder
from crag.retrieval.search.local_index import LocalIndex

log = logging.getLogger(__name__)
# The SDK's HTTP logging policy logs every request and response at INFO: keep the bot's log readable
# (it redacts the api-key header, but a line per search is noise).
logging.getLogger("azure.core.pipeline.policies.http_logging_policy").setLevel(logging.WARNING)

T = TypeVar("T")

# The token audience of Azure AI Search in Azure's public cloud (the SDK asks for AUDIENCE/.default).
SEARCH_AUDIENCE = "https://search.azure.com"

# The semantic ranker reads at most this many candidates from the first retrieval stage.
SEMANTIC_MAX_CANDIDATES = 50


class SearchUnavailable(Exception):
    """Azure AI Search could not answer. The message is safe to log and show: it never holds the key."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


# What the SDK raises when the service fails or cannot be reached.
SERVICE_ERRORS: tuple[type[BaseException], ...] = (
    AzureError,
    DeserializationError,
    TimeoutError,
    OSError,
)


def client_options(config: AzureSearchConfig) -> dict[str, Any]:
    """Keyword arguments for the SDK clients: timeouts, a short retry budget, the API version."""
    options: dict[str, Any] = {
        "connection_timeout": config.timeout_s,
        "read_timeout": config.timeout_s,
        "retry_total": config.retries,
        "retry_backoff_factor": 0.5,
        "retry_backoff_max": 4,
    }
    if config.api_version:
        options["api_version"] = config.api_version
    return options


class _KeylessSearchClient(SearchClient):
    """A SearchClient signing in with its own Entra credential, which it closes with itself."""

    def __init__(self, config: AzureSearchConfig, credential: AsyncTokenCredential, **options: Any) -> None:
        super().__init__(config.endpoint, config.index_name, credential, audience=SEARCH_AUDIENCE, **options)
        self._own_credential = credential

    async def close(self) -> None:
        await super().close()
        await self._own_credential.close()


def make_search_client(config: AzureSearchConfig, **transport: Any) -> SearchClient:
    """The SDK client: with the key when one is set, else with an Entra token (the managed identity in
    Azure). azure-core sends bearer tokens over https only. transport: azure-core options such as
    connection_verify (a CA bundle)."""
    key = config.api_key.get_secret_value()
    if key:
        return SearchClient(
            config.endpoint, config.index_name, AzureKeyCredential(key), **client_options(config), **transport
        )
    return _KeylessSearchClient(config, async_credential(), **client_options(config), **transport)


def unavailable(exc: BaseException, config: AzureSearchConfig, action: str = "search") -> SearchUnavailable:
    """A SearchUnavailable describing exc without the key (nor any raw exception text from the client)."""
    status: int | None = None
    if isinstance(exc, HttpResponseError) and exc.status_code is not None:
        status = exc.status_code
        code, detail = _service_error(exc)
        message = f"Azure AI Search {action} failed (HTTP {status}{', ' + code if code else ''})"
        if detail:
            message += f": {detail}"
    elif isinstance(exc, (TimeoutError, ServiceRequestTimeoutError, ServiceResponseTimeoutError)):
        message = f"Azure AI Search {action} timed out"
    elif isinstance(exc, (ServiceRequestError, OSError)):
        message = f"Azure AI Search is unreachable ({exc.__class__.__name__})"
    elif isinstance(exc, ServiceResponseError):
        message = f"Azure AI Search {action} failed: the connection broke ({exc.__class__.__name__})"
    else:
        message = f"Azure AI Search {action} failed ({exc.__class__.__name__})"
    return SearchUnavailable(scrub(message, config), status)


def scrub(text: str, config: AzureSearchConfig) -> str:
    key = config.api_key.get_secret_value()
    return text.replace(key, "***") if key else text


def _service_error(exc: HttpResponseError) -> tuple[str, str]:
    """The service's error code and message (it explains itself in an OData error body)."""
    code = message = ""
    error = getattr(exc, "error", None)
    if error is not None:
        code = str(getattr(error, "code", "") or "")
        message = str(getattr(error, "message", "") or "")
    if not (code or message) and exc.model is not None:
        detail = getattr(exc.model, "error", None)
        code = str(getattr(detail, "code", "") or "")
        message = str(getattr(detail, "message", "") or "")
    return code[:80], " ".join(message.split())[:300]


async def guarded(
    call: Callable[[], Awaitable[T]], config: AzureSearchConfig, action: str, deadline_s: float | None
) -> T:
    """Run call within a total deadline (None: only the per-request timeouts), turning every service
    failure into SearchUnavailable."""
    try:
        async with asyncio.timeout(deadline_s):
            return await call()
    except SERVICE_ERRORS as exc:
        raise unavailable(exc, config, action) from None


class AzureSearchRetriever:
    """The Retriever protocol over Azure AI Search. Needs an Embedder in vector and hybrid modes."""

    def __init__(
        self,
        config: AzureSearchConfig,
        embedder: Embedder | None = None,
        client: SearchClient | None = None,
        unknown_allowed: bool = False,
    ) -> None:
        if config.mode != "keyword" and embedder is None:
            raise ValueError(f"Azure AI Search mode {config.mode!r} needs an embedder")
        self._config = config
        self._unknown_allowed = unknown_allowed  # trimming: chunks of unknown permissions readable
        self._embedder = embedder if config.mode != "keyword" else None
        self._client = client or make_search_client(config)
        self._select = config.retrievable_fields()
        # A whole search, retries included, never takes longer than this.
        self._deadline = config.timeout_s * (config.retries + 1) + 2.0
        self.name = f"azure-search-{config.mode}" + ("+semantic" if config.semantic else "")

    async def close(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> AzureSearchRetriever:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def search(
        self, query: str, top_k: int, question: str | None = None, reader: Reader | None = None
    ) -> list[GradedChunk]:
        # The vector side embeds the rewritten query, as azure-search-openai-demo does: the LLM
        # rewrite resolves follow-ups that the user's own words leave open.
        del question
        query = query.strip()
        if not query or top_k <= 0:
            return []
        vector = await self._embed(query)
        request = self.request(query, top_k, vector, reader)

        async def run() -> list[dict[str, Any]]:
            results = await self._client.search(**request)
            docs: list[dict[str, Any]] = []
            async for doc in results:
                docs.append(doc)
                if len(docs) >= top_k:
                    break
            return docs

        docs = await guarded(run, self._config, "search", self._deadline)
        graded = [g for g in (self._graded(d) for d in docs) if g is not None]
        if reader is not None:
            graded = self._readable(graded, reader)
        log.debug("azure search %r: %d hits", query, len(graded))
        return graded

    def request(
        self, query: str, top_k: int, vector: list[float] | None, reader: Reader | None = None
    ) -> dict[str, Any]:
        """The keyword arguments of SearchClient.search for this query (public for tests and tools).
        With a reader, the service filters on the chunks' readers before it ranks and takes `top`."""
        c = self._config
        request: dict[str, Any] = {"top": top_k, "select": self._select}
        filters = [c.filter] if c.filter else []
        if reader is not None:
            if not c.allowed_field:
                raise SearchUnavailable("access trimming needs the index's permissions field (allowed_field)")
            filters.append(access_filter(c.allowed_field, reader, self._unknown_allowed))
            request["select"] = [*self._select, c.allowed_field]
        if filters:
            request["filter"] = filters[0] if len(filters) == 1 else " and ".join(f"({f})" for f in filters)
        if c.mode != "vector":
            request["search_text"] = query
        if vector is not None:
            k = top_k
            if c.semantic:
                k = max(top_k, min(SEMANTIC_MAX_CANDIDATES, top_k * c.semantic_k_multiplier))
            request["vector_queries"] = [
                VectorizedQuery(vector=vector, k_nearest_neighbors=k, fields=c.vector_field)
            ]
            if reader is not None:
                # The service's default, said explicitly: filter first, then take the k nearest
                # (postFilter would take k and then drop the unreadable ones, leaving fewer).
                request["vector_filter_mode"] = "preFilter"
        if c.semantic:
            request["query_type"] = "semantic"
            request["semantic_configuration_name"] = c.semantic_configuration
            if c.mode == "vector":
                # Pure vector retrieval has no search text for the ranker to read: give it the query.
                request["semantic_query"] = query
        return request

    async def _embed(self, query: str) -> list[float] | None:
        if self._embedder is None:
            return None
        try:
            vector = [float(x) for x in await self._embedder.embed_query(query)]
        except Exception as exc:  # the embedder's own failure; its text may hold its own key
            if self._config.mode == "hybrid":
                log.warning("query embedding failed (%s); keyword search only", exc.__class__.__name__)
                return None
            raise SearchUnavailable(
                f"query embedding failed ({exc.__class__.__name__}); vector search is unavailable"
            ) from None
        if len(vector) != self._config.vector_dimensions:
            message = (
                f"the embedder returned {len(vector)} dimensions, the index expects "
                f"{self._config.vector_dimensions}"
            )
            if self._config.mode == "hybrid":
                log.warning("%s; keyword search only", message)
                return None
            raise SearchUnavailable(message)
        return vector

    def _readable(self, graded: list[GradedChunk], reader: Reader) -> list[GradedChunk]:
        """The hits the reader may read. The service's filter already ensures it; this second look
        catches an index or a filter gone wrong, and then fails closed (the hit is dropped)."""
        kept = [g for g in graded if may_read(g.chunk.allowed, reader, self._unknown_allowed)]
        if len(kept) != len(graded):
            log.error(
                "Azure AI Search returned %d chunk(s) the access filter should have excluded; dropped",
                len(graded) - len(kept),
            )
        return kept

    def _graded(self, doc: dict[str, Any]) -> GradedChunk | None:
        chunk = chunk_from_document(doc, self._config)
        if chunk is None:
            return None
        # The SDK copies @search.rerankerScore to "@search.reranker_score" (None without the ranker).
        reranker = doc.get("@search.reranker_score", doc.get("@search.rerankerScore"))
        score = reranker if reranker is not None else doc.get("@search.score")
        return GradedChunk(chunk=chunk, retrieval_score=_as_float(score))


def chunk_from_document(doc: dict[str, Any], config: AzureSearchConfig) -> Chunk | None:
    """A Chunk from a search result; None when it has no id. Missing optional fields get defaults."""
    chunk_id = doc.get(config.id_field)
    if chunk_id is None or chunk_id == "":
        return None

    def text(field: str) -> str:
        value = doc.get(field) if field else None
        return "" if value is None else str(value)

    file = text(config.file_field)
    title = text(config.title_field) or file or str(chunk_id)
    headers_value = doc.get(config.headers_field) if config.headers_field else None
    if isinstance(headers_value, list):
        headers = [str(h) for h in headers_value if h is not None and str(h)]
    elif isinstance(headers_value, str) and headers_value:
        headers = [h.strip() for h in headers_value.split(" > ") if h.strip()]
    else:
        headers = []
    ordinal_value = doc.get(config.ordinal_field) if config.ordinal_field else None
    try:
        ordinal = int(ordinal_value) if ordinal_value is not None else 0
    except (TypeError, ValueError):
        ordinal = 0
    return Chunk(
        id=str(chunk_id),
        file=file,
        title=title,
        headers=headers,
        text=text(config.content_field),
        url=text(config.url_field),
        ordinal=ordinal,
        allowed=principals_from_stored(doc.get(config.allowed_field)) if config.allowed_field else None,
    )


# -- who may read a chunk, as the index stores it -------------------------------------------------
# An empty (or missing) collection is a chunk of unknown permissions, as in an index filled by
# another tool; a chunk nobody may read holds this one value, which no reader ever has.
NO_READER = "!nobody"


def stored_principals(allowed: tuple[str, ...] | None) -> list[str]:
    """The permissions field's value for a chunk's `allowed` (crag/core/access.py)."""
    if allowed is None:
        return []
    return list(allowed) or [NO_READER]


def principals_from_stored(value: Any) -> tuple[str, ...] | None:
    if not isinstance(value, list) or not value:
        return None
    return tuple(p for p in normalize(str(v) for v in value if v is not None) if p != NO_READER)


def odata_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def access_filter(field: str, reader: Reader, unknown_allowed: bool = False) -> str:
    """The OData filter of the chunks a reader may read: some principal of the chunk is one of the
    reader's (search.in, the service's fast path for long lists: a user may be in hundreds of
    groups), or, when unknown permissions are allowed, a chunk with none. Principals holding the
    list's delimiter are left out (never ids: GUIDs, '*', the access file's checked names)."""
    listed = ",".join(sorted(p for p in reader if "," not in p))
    clause = f"{field}/any(p: search.in(p, {odata_string(listed)}, ','))"
    return f"({clause} or not {field}/any())" if unknown_allowed else clause


def _as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


# -- as a search provider (registered in crag/retrieval/search/__init__.py) ---------------------------------
USES_LOCAL_INDEX = False


def configured(settings: CragSettings) -> bool:
    return settings.azure_search.configured


def build(settings: CragSettings, index: LocalIndex | None, llm: LlmClient | None) -> SearchBuild:
    """The retriever over the AZURE_SEARCH_* index; the query is embedded by the LLM's embedding model
    in vector and hybrid modes."""
    config = settings.azure_search.config()
    embedder = LlmEmbedder(llm) if llm is not None and llm.embedding_model else None
    if config.mode != "keyword" and embedder is None:
        raise ValueError(
            f"AZURE_SEARCH_MODE={config.mode} needs an embedding model "
            "(AZURE_OPENAI_EMBEDDING_DEPLOYMENT or OPENAI_EMBEDDING_MODEL)"
        )
    if settings.access_trimming and not config.allowed_field:
        raise ValueError(
            "CRAG_ACCESS_TRIMMING needs AZURE_SEARCH_FIELD_ALLOWED (the index's permissions field)"
        )
    retriever = AzureSearchRetriever(config, embedder, unknown_allowed=settings.access_unknown == "allow")
    return SearchBuild(retriever, (retriever.close,))
