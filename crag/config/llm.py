"""Settings of the language model: Azure OpenAI (key or Entra ID), or OpenAI / any compatible server."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from crag.config.env import EnvSettings


class LlmSettings(EnvSettings):
    # auto: Azure OpenAI when its endpoint and deployment are set, else OpenAI when a key or base URL
    # is, else none (the embedded default).
    provider: Literal["auto", "local", "openai", "azure"] = Field(default="auto", alias="CRAG_LLM")
    azure_openai_endpoint: str = Field(default="", alias="AZURE_OPENAI_ENDPOINT")
    azure_openai_api_key: SecretStr = Field(default=SecretStr(""), alias="AZURE_OPENAI_API_KEY")
    azure_openai_deployment: str = Field(default="", alias="AZURE_OPENAI_DEPLOYMENT")
    azure_openai_api_version: str = Field(default="2024-10-21", alias="AZURE_OPENAI_API_VERSION")
    azure_openai_embedding_deployment: str = Field(default="", alias="AZURE_OPENAI_EMBEDDING_DEPLOYMENT")
    openai_api_key: SecretStr = Field(default=SecretStr(""), alias="OPENAI_API_KEY")
    openai_base_url: str = Field(default="", alias="OPENAI_BASE_URL")
    openai_model: str = Field(default="gpt-4o-mini", alias="OPENAI_MODEL")
    openai_embedding_model: str = Field(default="", alias="OPENAI_EMBEDDING_MODEL")
    timeout: float = Field(default=20.0, gt=0, le=300, alias="CRAG_LLM_TIMEOUT")
    max_retries: int = Field(default=2, ge=0, le=10, alias="CRAG_LLM_MAX_RETRIES")
    concurrency: int = Field(default=16, ge=1, le=256, alias="CRAG_LLM_CONCURRENCY")
