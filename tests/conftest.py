from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

# pytest imports this file as tests.conftest (tests/ is a package), so the repository root is on
# sys.path already.
from tests.fakes.bot_connector import FakeConnector
from tests.fakes.openai_api import FakeOpenAI
from tests.paths import TEST_DATA

# Throwaway servers for the tests that use a real service (tests/servers/), and the fake Graph.
pytest_plugins = ["tests.servers.postgres", "tests.servers.azurite", "tests.fakes.graph_fixtures"]


@pytest.fixture
async def connector() -> AsyncIterator[FakeConnector]:
    fake = FakeConnector()
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture
async def fake_openai() -> AsyncIterator[FakeOpenAI]:
    """A fake OpenAI-compatible server on 127.0.0.1 (tests/fakes/openai_api.py)."""
    server = FakeOpenAI()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture(scope="session")
def sample_questions() -> list[dict[str, Any]]:
    path = TEST_DATA / "sample_questions.jsonl"
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
