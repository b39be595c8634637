"""Bot settings: the engine's settings plus hosting and Bot Framework credentials."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, SecretStr, model_validator

from crag.config.engine_settings import BLOB_CONTAINER_PATTERN, REPO_ROOT, CragSettings
from hosting.client_address import Network, parse_networks

ADMIN_KEY_MIN_CHARS = 16  # a shared key guessable in a few tries would protect nothing
_GUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


class BotSettings(CragSettings):
    port: int = Field(default=3978, ge=1, le=65535, alias="PORT")
    # Empty: 127.0.0.1 while no app id is configured (an unauthenticated bot must stay local).
    host: str = Field(default="", alias="HOST")
    # Processes serving PORT together (SO_REUSEPORT; `python app.py --workers N`): one per core.
    workers: int = Field(default=1, ge=1, le=64, alias="CRAG_WORKERS")
    # With as many workers as cores this process may use, each worker keeps to one core (hosting/workers.py).
    pin_workers: bool = Field(default=True, alias="CRAG_PIN_WORKERS")
    # Answers and ratings: sqlite (CRAG_FEEDBACK_DB, no setup, one instance) or postgres (CRAG_POSTGRES_URL,
    # shared by several instances; the schema is migrated at start and by `python -m feedback
    # migrate`).
    feedback_store: Literal["sqlite", "postgres"] = Field(default="sqlite", alias="CRAG_FEEDBACK_STORE")
    feedback_db: Path = Field(default=REPO_ROOT / "data" / "feedback.sqlite3", alias="CRAG_FEEDBACK_DB")
    postgres_url: SecretStr = Field(default=SecretStr(""), alias="CRAG_POSTGRES_URL")  # postgresql://…
    # "entra": log in with the managed identity's token as the password (the DSN names the role, no
    # password), as Azure's PostgreSQL with Entra-only authentication asks; "password": the DSN's own.
    postgres_auth: Literal["password", "entra"] = Field(default="password", alias="CRAG_POSTGRES_AUTH")
    postgres_pool_size: int = Field(default=10, ge=1, le=200, alias="CRAG_POSTGRES_POOL_SIZE")
    # false: the bot's role may not change the schema (Azure: the migration job owns it); the bot only
    # checks the version and keeps writes in the pending file until the job has run.
    postgres_migrate: bool = Field(default=True, alias="CRAG_POSTGRES_MIGRATE")
    # Postgres store: writes the server could not take wait in this local file until it is back.
    # Empty: feedback-postgres.pending.jsonl next to CRAG_FEEDBACK_DB.
    feedback_pending: str = Field(default="", alias="CRAG_FEEDBACK_PENDING")
    # Where users reach the bot (for links to local documents); default http://localhost:PORT.
    public_base_url: str = Field(default="", alias="PUBLIC_BASE_URL")
    bot_name: str = Field(default="CRAG Assistant", alias="BOT_NAME")
    # Example questions on the welcome card, separated by "|" (empty: examples for the sample documents).
    welcome_examples: str = Field(default="", alias="WELCOME_EXAMPLES")
    # Teams 1:1 chats: progress updates and the answer streamed as it is written.
    streaming: bool = Field(default=True, alias="CRAG_STREAMING")
    stream_interval: float = Field(default=1.5, ge=0, le=10, alias="CRAG_STREAM_INTERVAL")
    history_turns: int = Field(default=3, ge=0, le=20, alias="CRAG_HISTORY_TURNS")
    # Every retrieved passage's raw grade in the card's sources (for administrators tuning thresholds).
    card_scores: bool = Field(default=False, alias="CRAG_CARD_SCORES")
    # Access trimming in channels and group chats, where every member sees the answer: "everyone"
    # answers there only from documents everyone may read; "asker" trims to the asker's permissions
    # (for teams whose members may all read what each of them may).
    access_shared_chats: Literal["everyone", "asker"] = Field(
        default="everyone", alias="CRAG_ACCESS_SHARED_CHATS"
    )

    # Conversation state: sqlite (default, survives restarts), memory, blob or cosmos (several instances).
    state_storage: Literal["sqlite", "memory", "blob", "cosmos"] = Field(
        default="sqlite", alias="STATE_STORAGE"
    )
    state_db: Path = Field(default=REPO_ROOT / "data" / "state.sqlite3", alias="CRAG_STATE_DB")
    # SQLite state of a conversation untouched this many days is deleted (swept at start, then hourly).
    state_ttl_days: float = Field(default=30.0, gt=0, le=3650, alias="CRAG_STATE_TTL_DAYS")
    # STATE_STORAGE=blob: the account is AZURE_STORAGE_CONNECTION_STRING, a setting of CragSettings (the
    # vector cache's Blob copy, CRAG_VECTOR_CACHE_BLOB_CONTAINER, is kept in the same account).
    # Azure's rule for container names (3-63 lowercase letters, digits and single hyphens inside),
    # checked at start: a bad name would fail every turn on first use instead.
    azure_storage_container: str = Field(
        default="bot-state",
        min_length=3,
        max_length=63,
        pattern=BLOB_CONTAINER_PATTERN,
        alias="AZURE_STORAGE_CONTAINER",
    )
    cosmos_endpoint: str = Field(default="", alias="COSMOS_ENDPOINT")
    cosmos_key: SecretStr = Field(default=SecretStr(""), alias="COSMOS_KEY")
    cosmos_database: str = Field(default="crag-bot", alias="COSMOS_DATABASE")
    cosmos_container: str = Field(default="bot-state", alias="COSMOS_CONTAINER")

    # Web Chat (/chat): with a Direct Line secret the page talks to the Azure Bot's Direct Line channel
    # (the secret is exchanged for a per-user token server-side and never sent to the browser); without
    # one, and while no app id is configured, to the app's own local Direct Line endpoint.
    direct_line_secret: SecretStr = Field(default=SecretStr(""), alias="DIRECT_LINE_SECRET")
    direct_line_endpoint: str = Field(
        default="https://directline.botframework.com/v3/directline", alias="DIRECT_LINE_ENDPOINT"
    )
    # Token requests per minute and client IP on /api/directline/token (each one may cost a Direct Line call).
    webchat_tokens_per_minute: int = Field(default=10, ge=1, le=10_000, alias="WEBCHAT_TOKENS_PER_MINUTE")
    # Origins allowed to call the token and local Direct Line endpoints from another site (comma-separated).
    webchat_allowed_origins: str = Field(default="", alias="WEBCHAT_ALLOWED_ORIGINS")

    # Where inbound tokens' signing keys are published. Empty: the public Bot Framework cloud. Set for
    # a sovereign or private cloud (and, in tests, a local OpenID endpoint with its own keys).
    openid_metadata_url: str = Field(default="", alias="BOT_OPENID_METADATA_URL")
    # Seconds a request's token validation may wait for the signing keys before answering 503.
    auth_timeout: float = Field(default=10.0, gt=0, le=120, alias="BOT_AUTH_TIMEOUT")

    # Without an app id the bot is a loopback tool: it listens on 127.0.0.1, replies only to loopback
    # serviceUrls and answers only Host names that are IP literals, "localhost", PUBLIC_BASE_URL's
    # host or one listed here (comma-separated; against DNS rebinding). A non-loopback HOST without
    # an app id is refused unless CRAG_ALLOW_REMOTE_UNAUTHENTICATED is set.
    allowed_hosts: str = Field(default="", alias="CRAG_ALLOWED_HOSTS")
    allow_remote_unauthenticated: bool = Field(default=False, alias="CRAG_ALLOW_REMOTE_UNAUTHENTICATED")
    # Reverse proxies in front of the bot (addresses or CIDR ranges, comma-separated): from these
    # peers X-Forwarded-For names the client that rate limits and the admin lockout count
    # (hosting/client_address.py). Empty: the TCP peer is the client, whatever the header says.
    trusted_proxies: str = Field(default="", alias="CRAG_TRUSTED_PROXIES")
    # A client has this many seconds to send a request (headers, from connecting or from the previous
    # answer) and again to send its body; then the connection is closed (slowloris).
    http_client_timeout: float = Field(default=15.0, gt=0, le=3600, alias="CRAG_HTTP_CLIENT_TIMEOUT")

    # With an app id, links to documents served under /docs/ are signed and expire (like a SAS URL).
    # Empty secret: derived from MicrosoftAppPassword, so every instance of the bot accepts the links.
    link_secret: SecretStr = Field(default=SecretStr(""), alias="CRAG_LINK_SECRET")
    link_ttl_hours: float = Field(default=24.0, gt=0, le=24 * 90, alias="CRAG_LINK_TTL_HOURS")
    # With an app id, /api/health tells only the status, unless the X-Health-Key header holds this key.
    health_key: SecretStr = Field(default=SecretStr(""), alias="CRAG_HEALTH_KEY")

    # The admin dashboard (/admin, admin/) is off until one of these is set. CRAG_ADMIN_KEY: a shared
    # key (the X-Admin-Key header or the sign-in form). CRAG_ADMIN_GROUP: with an app id, the object id
    # of an Entra ID group; access tokens for the bot's app whose `groups` claim holds it are accepted.
    admin_key: SecretStr = Field(default=SecretStr(""), alias="CRAG_ADMIN_KEY")
    admin_group: str = Field(default="", alias="CRAG_ADMIN_GROUP")
    # The tenant whose tokens are accepted (empty: MicrosoftAppTenantId); its signing keys' metadata
    # (empty: the public cloud's); an audience besides the app id and api://<app id>.
    admin_tenant_id: str = Field(default="", alias="CRAG_ADMIN_TENANT_ID")
    admin_openid_metadata_url: str = Field(default="", alias="CRAG_ADMIN_OPENID_METADATA_URL")
    admin_audience: str = Field(default="", alias="CRAG_ADMIN_AUDIENCE")
    # How long a sign-in lasts (an Entra ID sign-in no longer than its token).
    admin_session_hours: float = Field(default=8.0, gt=0, le=24 * 7, alias="CRAG_ADMIN_SESSION_HOURS")
    # The dashboard's days begin at midnight here (an IANA name, e.g. Asia/Tokyo).
    admin_timezone: str = Field(default="UTC", alias="CRAG_ADMIN_TIMEZONE")

    app_id: str = Field(default="", alias="MicrosoftAppId")
    app_password: SecretStr = Field(default=SecretStr(""), alias="MicrosoftAppPassword")
    app_type: str = Field(default="MultiTenant", alias="MicrosoftAppType")
    app_tenant_id: str = Field(default="", alias="MicrosoftAppTenantId")

    # Teams app package (tools/build_teams_package.py). Empty app id: a stable UUID derived from
    # MicrosoftAppId; empty version: the project version (pyproject.toml). Bump the version to update
    # an app already uploaded to Teams.
    teams_app_id: str = Field(default="", alias="TEAMS_APP_ID")
    teams_app_version: str = Field(default="", alias="TEAMS_APP_VERSION")

    @model_validator(mode="after")
    def _proxies_readable(self) -> BotSettings:
        self.proxy_networks  # noqa: B018 - raises ValueError naming a bad entry
        return self

    @model_validator(mode="after")
    def _admin_access_sound(self) -> BotSettings:
        key = self.admin_key.get_secret_value()
        if key and len(key) < ADMIN_KEY_MIN_CHARS:
            raise ValueError(
                f"CRAG_ADMIN_KEY must be at least {ADMIN_KEY_MIN_CHARS} characters "
                "(make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))')"
            )
        if self.admin_group:
            if not _GUID.match(self.admin_group):
                raise ValueError("CRAG_ADMIN_GROUP must be the object id (a GUID) of an Entra ID group")
            if not self.app_id:
                raise ValueError("CRAG_ADMIN_GROUP needs MicrosoftAppId: tokens are accepted for that app")
            if not _GUID.match(self.admin_tenant):
                raise ValueError(
                    "CRAG_ADMIN_GROUP needs the tenant's id (a GUID): "
                    "CRAG_ADMIN_TENANT_ID or MicrosoftAppTenantId"
                )
        try:
            ZoneInfo(self.admin_timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"CRAG_ADMIN_TIMEZONE={self.admin_timezone!r} is not a time zone name") from None
        return self

    @property
    def proxy_networks(self) -> tuple[Network, ...]:
        return parse_networks(self.trusted_proxies.split(","))

    @property
    def admin_tenant(self) -> str:
        return self.admin_tenant_id or self.app_tenant_id

    @property
    def admin_metadata_url(self) -> str:
        """Where the tenant publishes the keys that sign its tokens (v1 and v2 tokens alike)."""
        return (
            self.admin_openid_metadata_url
            or f"https://login.microsoftonline.com/{self.admin_tenant}/v2.0/.well-known/openid-configuration"
        )

    @property
    def bind_host(self) -> str:
        if self.host:
            return self.host
        return "0.0.0.0" if self.app_id else "127.0.0.1"

    @property
    def feedback_pending_path(self) -> Path:
        return (
            Path(self.feedback_pending)
            if self.feedback_pending
            else self.feedback_db.with_name("feedback-postgres.pending.jsonl")
        )

    @property
    def base_url(self) -> str:
        return (self.public_base_url or f"http://localhost:{self.port}").rstrip("/")

    @property
    def docs_url(self) -> str:
        """Where the bot serves the local documents: the base of their citation links, and so part of
        the local index's fingerprint (hosting/workers.py prepares the index with the same one)."""
        return f"{self.base_url}/docs"

    def bot_framework_config(self) -> SimpleNamespace:
        """The attribute names ConfigurationBotFrameworkAuthentication reads."""
        config = SimpleNamespace(
            APP_ID=self.app_id,
            APP_PASSWORD=self.app_password.get_secret_value(),
            APP_TYPE=self.app_type,
            APP_TENANTID=self.app_tenant_id,
        )
        if self.openid_metadata_url:
            # Any of these switches the SDK to its "parameterized" authentication, which then needs
            # all of them: the public cloud's values, except where the keys come from.
            config.TO_BOT_FROM_CHANNEL_OPENID_METADATA_URL = self.openid_metadata_url
            config.TO_BOT_FROM_EMULATOR_OPENID_METADATA_URL = self.openid_metadata_url
            config.TO_CHANNEL_FROM_BOT_LOGIN_URL = "https://login.microsoftonline.com/botframework.com"
            config.TO_CHANNEL_FROM_BOT_OAUTH_SCOPE = "https://api.botframework.com"
            config.TO_BOT_FROM_CHANNEL_TOKEN_ISSUER = "https://api.botframework.com"
            config.OAUTH_URL = "https://api.botframework.com"
            config.CALLER_ID = "urn:botframework:azure"
        return config
