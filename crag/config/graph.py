"""The GRAPH_* settings: the Entra ID app the bot calls Microsoft Graph as (app-only: a client secret,
or, with GRAPH_AUTH=managed_identity, the managed identity the process runs as, which needs no secret).

Read apart from the client, which imports the Graph SDK (a large package): settings load fast.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator

from crag.config.env import EnvSettings

GRAPH_URL = "https://graph.microsoft.com/v1.0"
GRAPH_SCOPE = "https://graph.microsoft.com/.default"
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class GraphSettings(EnvSettings):
    # managed_identity: Graph's app roles (Sites.Read.All or Sites.Selected, GroupMember.Read.All) are
    # granted to the identity itself (docs/sharepoint.md); the token comes from azure-identity
    # (AZURE_CLIENT_ID names a user-assigned identity), so no client secret exists to keep or rotate.
    auth: Literal["secret", "managed_identity"] = Field(default="secret", alias="GRAPH_AUTH")
    tenant_id: str = Field(default="", alias="GRAPH_TENANT_ID")
    client_id: str = Field(default="", alias="GRAPH_CLIENT_ID")
    client_secret: SecretStr = Field(default=SecretStr(""), alias="GRAPH_CLIENT_SECRET")
    # The Entra ID authority (another cloud's, e.g. login.microsoftonline.us) and the Graph endpoint
    # that goes with it (https://graph.microsoft.us/v1.0); tests point both at fakes on 127.0.0.1.
    authority_host: str = Field(default="login.microsoftonline.com", alias="GRAPH_AUTHORITY_HOST")
    base_url: str = Field(default=GRAPH_URL, alias="GRAPH_BASE_URL")
    # The token's audience: the Graph of the cloud (https://graph.microsoft.us/.default for US Gov).
    scope: str = Field(default=GRAPH_SCOPE, alias="GRAPH_SCOPE")
    timeout: float = Field(default=60.0, gt=0, le=600, alias="GRAPH_TIMEOUT")

    @field_validator("base_url")
    @classmethod
    def _https_unless_loopback(cls, value: str) -> str:
        """The access token travels with every request: never in clear text to another machine."""
        value = value.strip().rstrip("/")
        parts = urlsplit(value)
        if parts.scheme == "https" and parts.hostname:
            return value
        if parts.scheme == "http" and parts.hostname in _LOOPBACK:
            return value
        raise ValueError("GRAPH_BASE_URL must be an https URL (http only on 127.0.0.1, for tests)")

    @property
    def configured(self) -> bool:
        return not self.missing()

    def missing(self) -> list[str]:
        """The names of the settings still needed for app-only access."""
        if self.auth == "managed_identity":
            return []
        needed = {
            "GRAPH_TENANT_ID": self.tenant_id,
            "GRAPH_CLIENT_ID": self.client_id,
            "GRAPH_CLIENT_SECRET": self.client_secret.get_secret_value(),
        }
        return [name for name, value in needed.items() if not value]
