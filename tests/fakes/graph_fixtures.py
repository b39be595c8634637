"""The fake Graph (tests/fakes/graph.py) with its TLS authority, and settings pointing the bot at it."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme

from crag.config.engine_settings import CragSettings
from crag.providers.graph.client import GraphClient
from tests.fakes.graph import FakeGraph

SITE_URL = "https://contoso.sharepoint.com/sites/hr"
GROUP_A = "aaaaaaaa-0000-0000-0000-00000000000a"
GROUP_B = "bbbbbbbb-0000-0000-0000-00000000000b"
ALICE = "a11ce000-0000-0000-0000-000000000001"


@dataclass
class Graph:
    fake: FakeGraph
    ca_file: Path  # the CA of the authority's certificate (azure-identity must trust it)
    site: str
    drive: str  # the default library's drive id

    def settings(self, tmp_path: Path, **extra: Any) -> CragSettings:
        values: dict[str, Any] = {
            "CRAG_SOURCE": "sharepoint",
            "CRAG_SHAREPOINT_SITE": SITE_URL,
            "CRAG_SHAREPOINT_SYNC_MINUTES": 0,
            "GRAPH_TENANT_ID": self.fake.tenant_id,
            "GRAPH_CLIENT_ID": self.fake.client_id,
            "GRAPH_CLIENT_SECRET": self.fake.client_secret,
            "GRAPH_AUTHORITY_HOST": self.fake.authority,
            "GRAPH_BASE_URL": self.fake.url,
            "CRAG_INDEX_DIR": str(tmp_path / "index"),
            "CRAG_EMBEDDINGS": "off",
            "CRAG_SEARCH": "local",
            "CRAG_WEB": "off",
        }
        values.update(extra)
        return CragSettings(**values)

    def client(self, settings: CragSettings) -> GraphClient:
        return GraphClient(settings.graph, connection_verify=str(self.ca_file))

    def env(self, tmp_path: Path, **extra: str) -> dict[str, str]:
        """The same settings as environment variables, for the CLI in a subprocess."""
        settings = self.settings(tmp_path)
        env = {
            "CRAG_SHAREPOINT_SITE": SITE_URL,
            "GRAPH_TENANT_ID": self.fake.tenant_id,
            "GRAPH_CLIENT_ID": self.fake.client_id,
            "GRAPH_CLIENT_SECRET": self.fake.client_secret,
            "GRAPH_AUTHORITY_HOST": self.fake.authority,
            "GRAPH_BASE_URL": self.fake.url,
            "CRAG_INDEX_DIR": str(settings.index_dir),
            "CRAG_EMBEDDINGS": "off",
            # aiohttp (azure-identity's transport) reads the system CAs through OpenSSL: this one.
            "SSL_CERT_FILE": str(self.ca_file),
        }
        env.update(extra)
        return env


@pytest.fixture
async def graph(tmp_path: Path) -> AsyncIterator[Graph]:
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    ca_file = tmp_path / "fake-authority-ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    fake = FakeGraph()
    await fake.start(context)
    site = fake.add_site("contoso.sharepoint.com", "/sites/hr", "HR")
    drive = fake.add_drive(site, "Documents", "Shared Documents")
    try:
        yield Graph(fake, ca_file, site, drive)
    finally:
        await fake.stop()
