"""The SERPAPI_* settings (read apart from the client, which imports the requests stack)."""

from __future__ import annotations

from pydantic import Field, SecretStr

from crag.config.env import EnvSettings


class SerpApiSettings(EnvSettings):
    api_key: SecretStr = Field(default=SecretStr(""), alias="SERPAPI_API_KEY")
    base_url: str = Field(default="", alias="SERPAPI_BASE_URL")  # "" = serpapi.com (tests: a fake)
    timeout: float = Field(default=5.0, gt=0, le=60, alias="SERPAPI_TIMEOUT")

    @property
    def configured(self) -> bool:
        return bool(self.api_key.get_secret_value())
