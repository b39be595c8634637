"""The CRAG_SHAREPOINT_* settings: which library to index, how often, and how to read its permissions."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from pydantic import Field, field_validator

from crag.config.env import EnvSettings
from crag.config.paths import DATA_DIR

# Site collections live under one of these managed paths; what follows the site's name in a pasted
# URL (a library, a folder, a view) is not part of the site.
_MANAGED_PATHS = {"sites", "teams", "personal", "portals"}


def graph_site_key(site: str) -> str:
    """The site as Graph addresses it: `host:/sites/name` from a URL or that form, the host alone
    for a root site, or a site id (`host,guid,guid`) as given. ValueError when it is none of them."""
    site = site.strip()
    if not site:
        raise ValueError("no SharePoint site given (--site or CRAG_SHAREPOINT_SITE)")
    if "://" in site:
        parts = urlsplit(site)
        if parts.scheme != "https" or not parts.hostname:
            raise ValueError(f"not a SharePoint site URL: {site!r} (expected https://HOST/sites/NAME)")
        segments = [unquote(s) for s in parts.path.split("/") if s]
        if len(segments) >= 2 and segments[0].lower() in _MANAGED_PATHS:
            return f"{parts.hostname}:/{segments[0]}/{segments[1]}"
        if segments and segments[0].lower() in _MANAGED_PATHS:
            raise ValueError(f"the site URL {site!r} lacks the site's name after /{segments[0]}/")
        return parts.hostname  # the tenant's root site
    if re.fullmatch(r"[\w.-]+(:/[^\s]+)?", site) or re.fullmatch(r"[\w.-]+,[\w-]+,[\w-]+", site):
        return site.rstrip("/")
    raise ValueError(
        f"not a SharePoint site: {site!r} (give https://HOST/sites/NAME, HOST:/sites/NAME or a site id)"
    )


class SharePointSettings(EnvSettings):
    # https://contoso.sharepoint.com/sites/hr (or contoso.sharepoint.com:/sites/hr, or a site id).
    # A OneDrive is a site too: https://contoso-my.sharepoint.com/personal/alice_contoso_com.
    site: str = Field(default="", alias="CRAG_SHAREPOINT_SITE")
    # The document library by name ("Documents", "Policies") or drive id; empty: the site's default.
    drive: str = Field(default="", alias="CRAG_SHAREPOINT_DRIVE")
    # Only this folder of the library (and its subfolders), e.g. "HR/Policies"; empty: all of it.
    folder: str = Field(default="", alias="CRAG_SHAREPOINT_FOLDER")
    # The bot syncs the library this often while it serves (0: only `python -m crag.cli.ingest` does).
    sync_minutes: float = Field(default=15.0, ge=0, le=7 * 24 * 60, alias="CRAG_SHAREPOINT_SYNC_MINUTES")
    # SharePoint site groups (their display name, e.g. "HR Members") -> the Entra object ids (or "*")
    # whose members they hold, as JSON. Graph cannot list a site group's members: unmapped site
    # groups grant nobody access in the bot (see docs/sharepoint.md).
    site_groups: dict[str, list[str]] = Field(default_factory=dict, alias="CRAG_SHAREPOINT_SITE_GROUPS")
    # Larger files are skipped (and named) rather than downloaded.
    max_file_mb: float = Field(default=50.0, gt=0, le=2048, alias="CRAG_SHAREPOINT_MAX_FILE_MB")
    # Where the sync state (delta link, items seen) of an Azure AI Search target is kept; the local
    # index keeps its own in its manifest.
    state_dir: Path = Field(default=DATA_DIR / "sharepoint", alias="CRAG_SHAREPOINT_STATE_DIR")

    @field_validator("folder")
    @classmethod
    def _folder_path(cls, value: str) -> str:
        parts = [p for p in value.strip().replace("\\", "/").split("/") if p]
        if any(p in (".", "..") for p in parts):
            raise ValueError("CRAG_SHAREPOINT_FOLDER must be a path inside the library, without '..'")
        return "/".join(parts)

    @field_validator("site_groups", mode="before")
    @classmethod
    def _json_object(cls, value: object) -> object:
        """JSON text as well (the environment's form, also when given as an argument)."""
        if isinstance(value, str):
            try:
                return json.loads(value) if value.strip() else {}
            except ValueError as exc:
                raise ValueError("CRAG_SHAREPOINT_SITE_GROUPS must be a JSON object") from exc
        return value

    @field_validator("site_groups")
    @classmethod
    def _lower_names(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        return {name.strip().lower(): list(ids) for name, ids in value.items()}

    @property
    def configured(self) -> bool:
        return bool(self.site)

    @property
    def max_bytes(self) -> int:
        return int(self.max_file_mb * 1024 * 1024)
