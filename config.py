"""Bot settings: the engine's settings plus hosting and Bot Framework credentials."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from pydantic import Field, SecretStr

from crag.settings import REPO_ROOT, CragSettings


class BotSettings(CragSettings):
    port: int = Field(default=3978, ge=1, le=65535, alias="PORT")
    # Empty: 127.0.0.1 while no app id is configured (an unauthenticated bot must stay local).
    host: str = Field(default="", alias="HOST")
    feedback_db: Path = Field(default=REPO_ROOT / "data" / "feedback.sqlite3", alias="CRAG_FEEDBACK_DB")
    # Where users reach the bot (for links to local documents); default http://localhost:PORT.
    public_base_url: str = Field(default="", alias="PUBLIC_BASE_URL")
    bot_name: str = Field(default="CRAG Assistant", alias="BOT_NAME")
    history_turns: int = Field(default=3, ge=0, le=20, alias="CRAG_HISTORY_TURNS")

    app_id: str = Field(default="", alias="MicrosoftAppId")
    app_password: SecretStr = Field(default=SecretStr(""), alias="MicrosoftAppPassword")
    app_type: str = Field(default="MultiTenant", alias="MicrosoftAppType")
    app_tenant_id: str = Field(default="", alias="MicrosoftAppTenantId")

    @property
    def bind_host(self) -> str:
        if self.host:
            return self.host
        return "0.0.0.0" if self.app_id else "127.0.0.1"

    @property
    def base_url(self) -> str:
        return (self.public_base_url or f"http://localhost:{self.port}").rstrip("/")

    def bot_framework_config(self) -> SimpleNamespace:
        """The attribute names ConfigurationBotFrameworkAuthentication reads."""
        return SimpleNamespace(
            APP_ID=self.app_id,
            APP_PASSWORD=self.app_password.get_secret_value(),
            APP_TYPE=self.app_type,
            APP_TENANTID=self.app_tenant_id,
        )
