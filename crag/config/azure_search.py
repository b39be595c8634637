"""Settings of the Azure AI Search provider: where the index is, how to query it, which field holds what.

The defaults describe the index that `crag.ingest.azure_index.ensure_index` creates, so pointing the
provider at a fresh service needs only the endpoint and the index name: without a key the bot signs in
with its Entra identity (crag/outbound/entra_tokens.py), as in Azure, where the service's keys are off. An
existing index with other field names is mapped field by field; optional fields may be set to "" when
the index does not have them (their Chunk attribute then stays at its default).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from crag.config.env import EnvSettings
from crag.config.urls import endpoint_url

SearchMode = Literal["keyword", "vector", "hybrid"]

# Azure field names: a letter first, then letters, digits or underscores, at most 128 characters.
_FIELD_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,127}$")
# Index names: lowercase letters, digits or dashes, 2-128 characters, no leading/trailing dash.
_INDEX_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,126}[a-z0-9])$")

DEFAULT_INDEX_NAME = "crag-chunks"


class AzureSearchConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint: str  # https://NAME.search.windows.net
    index_name: str = DEFAULT_INDEX_NAME
    # "" (the default): Entra ID tokens, the service's role assignments decide. A key is for a local
    # stand-in or a service outside Azure's identities.
    api_key: SecretStr = SecretStr("")
    api_version: str | None = None  # None: the SDK's default API version

    mode: SearchMode = "keyword"
    semantic: bool = False  # rerank with the semantic ranker (needs it enabled on the service)
    semantic_configuration: str = "crag-semantic"
    # With the semantic ranker on, the vector query contributes top_k * this many candidates (at most 50,
    # which is what the ranker reads) so that reranking has more than the final top_k to choose from.
    semantic_k_multiplier: int = Field(default=5, ge=1, le=50)
    filter: str | None = None  # OData $filter applied to every retrieval query, e.g. "lang eq 'ja'"

    # Index creation only: the analyzer of the searchable text fields.
    analyzer: str = "ja.microsoft"

    # Field mapping. id and content are required; "" marks an optional field the index does not have.
    id_field: str = "id"
    content_field: str = "content"
    title_field: str = "title"
    file_field: str = "file"
    url_field: str = "url"
    headers_field: str = "headers"
    ordinal_field: str = "ordinal"
    content_hash_field: str = "content_hash"  # ingest only: skip unchanged files
    file_chunks_field: str = "file_chunks"  # ingest only: detect files whose upload was interrupted
    # Who may read each chunk (crag/core/access.py): a filterable Collection(Edm.String) that access
    # trimming filters on with search.in; "" for an index without one (trimming then refuses to start).
    allowed_field: str = "allowed"
    vector_field: str = "content_vector"
    vector_dimensions: int = Field(default=1536, ge=0, le=4096)  # 0: no vector field in the index

    timeout_s: float = Field(default=10.0, gt=0, le=300)  # connect and read timeout of one HTTP request
    retries: int = Field(default=2, ge=0, le=10)  # SDK retries on 408/429/5xx and connection errors

    @field_validator("endpoint")
    @classmethod
    def _endpoint_is_url(cls, value: str) -> str:
        return endpoint_url(
            value, "endpoint must be an http(s) URL such as https://NAME.search.windows.net", required=True
        )

    @field_validator("index_name")
    @classmethod
    def _index_name_valid(cls, value: str) -> str:
        if not _INDEX_NAME.match(value) or "--" in value:
            raise ValueError(
                f"invalid index name {value!r}: use 2-128 lowercase letters, digits or single dashes"
            )
        return value

    @field_validator(
        "id_field",
        "content_field",
        "title_field",
        "file_field",
        "url_field",
        "headers_field",
        "ordinal_field",
        "content_hash_field",
        "file_chunks_field",
        "allowed_field",
        "vector_field",
    )
    @classmethod
    def _field_name_valid(cls, value: str) -> str:
        if value and not _FIELD_NAME.match(value):
            raise ValueError(f"invalid field name {value!r}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> AzureSearchConfig:
        if not self.id_field or not self.content_field:
            raise ValueError("id_field and content_field are required")
        if self.mode != "keyword" and not (self.vector_field and self.vector_dimensions):
            raise ValueError(f"mode {self.mode!r} needs vector_field and vector_dimensions")
        if self.semantic and not self.semantic_configuration:
            raise ValueError("semantic ranking needs semantic_configuration")
        return self

    @property
    def has_vectors(self) -> bool:
        """Whether the index has (or is created with) a vector field."""
        return bool(self.vector_field and self.vector_dimensions)

    def retrievable_fields(self) -> list[str]:
        """The mapped fields a retrieval query selects (never the vector)."""
        names = [
            self.id_field,
            self.content_field,
            self.title_field,
            self.file_field,
            self.url_field,
            self.headers_field,
            self.ordinal_field,
        ]
        return [n for n in dict.fromkeys(names) if n]


class AzureSearchSettings(EnvSettings):
    """The AZURE_SEARCH_* settings; `config()` validates them into an AzureSearchConfig."""

    endpoint: str = Field(default="", alias="AZURE_SEARCH_ENDPOINT")
    index: str = Field(default="", alias="AZURE_SEARCH_INDEX")
    api_key: SecretStr = Field(default=SecretStr(""), alias="AZURE_SEARCH_API_KEY")
    mode: SearchMode = Field(default="keyword", alias="AZURE_SEARCH_MODE")
    semantic: bool = Field(default=False, alias="AZURE_SEARCH_SEMANTIC")
    semantic_config: str = Field(default="crag-semantic", alias="AZURE_SEARCH_SEMANTIC_CONFIG")
    filter: str = Field(default="", alias="AZURE_SEARCH_FILTER")
    analyzer: str = Field(default="ja.microsoft", alias="AZURE_SEARCH_ANALYZER")
    vector_dimensions: int = Field(default=1536, ge=0, le=4096, alias="AZURE_SEARCH_VECTOR_DIMENSIONS")
    timeout: float = Field(default=10.0, gt=0, le=300, alias="AZURE_SEARCH_TIMEOUT")
    # Field names of an existing index (defaults: the index `python -m crag.cli.ingest --target azure`
    # creates).
    field_id: str = Field(default="id", alias="AZURE_SEARCH_FIELD_ID")
    field_content: str = Field(default="content", alias="AZURE_SEARCH_FIELD_CONTENT")
    field_title: str = Field(default="title", alias="AZURE_SEARCH_FIELD_TITLE")
    field_file: str = Field(default="file", alias="AZURE_SEARCH_FIELD_FILE")
    field_url: str = Field(default="url", alias="AZURE_SEARCH_FIELD_URL")
    field_headers: str = Field(default="headers", alias="AZURE_SEARCH_FIELD_HEADERS")
    field_vector: str = Field(default="content_vector", alias="AZURE_SEARCH_FIELD_VECTOR")
    field_allowed: str = Field(default="allowed", alias="AZURE_SEARCH_FIELD_ALLOWED")

    @property
    def configured(self) -> bool:
        return bool(self.endpoint)

    def config(self) -> AzureSearchConfig:
        """The validated provider config; ValueError names what is missing or wrong."""
        if not self.endpoint:
            raise ValueError(
                "Azure AI Search needs AZURE_SEARCH_ENDPOINT (and AZURE_SEARCH_API_KEY, or none: Entra ID)"
            )
        return AzureSearchConfig(
            endpoint=self.endpoint,
            index_name=self.index or DEFAULT_INDEX_NAME,
            api_key=self.api_key,
            mode=self.mode,
            semantic=self.semantic,
            semantic_configuration=self.semantic_config,
            filter=self.filter or None,
            analyzer=self.analyzer,
            id_field=self.field_id,
            content_field=self.field_content,
            title_field=self.field_title,
            file_field=self.field_file,
            url_field=self.field_url,
            headers_field=self.field_headers,
            vector_field=self.field_vector,
            allowed_field=self.field_allowed,
            vector_dimensions=self.vector_dimensions,
            timeout_s=self.timeout,
        )
