from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The tests of the flow (routing, re-search, follow-ups, cards, the app) were written against the
# feature grader's grades on their small corpora, which do not move when the relevance model is
# retrained: they grade with it. The relevance model, the default, is tested on its own and through the
# app with CRAG_GRADER=local (tests/test_reading_grader.py, test_relevance_model.py,
# test_reading_conversation.py). Set before any settings are read; subprocesses inherit it.
os.environ.setdefault("CRAG_GRADER", "features")

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
