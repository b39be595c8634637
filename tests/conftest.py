from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fake_openai import FakeOpenAI  # noqa: E402
from tests.fakes import FakeConnector  # noqa: E402

# Throwaway servers for the tests that use a real service (tests/servers/), and the fake Graph.
pytest_plugins = ["tests.servers.postgres", "tests.servers.azurite", "tests.graph_fixtures"]

SAMPLE_DOCS = ROOT / "sample_docs"
SHARED_EVAL = ROOT / "data" / "eval"


@pytest.fixture
async def connector() -> AsyncIterator[FakeConnector]:
    fake = FakeConnector()
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture
async def fake_openai() -> AsyncIterator[FakeOpenAI]:
    """A fake OpenAI-compatible server on 127.0.0.1 (tests/fake_openai.py)."""
    server = FakeOpenAI()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture(scope="session")
def sample_questions() -> list[dict[str, Any]]:
    path = ROOT / "tests" / "data" / "sample_questions.jsonl"
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
