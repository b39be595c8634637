"""The repository's root and the folders tests read, for test modules at any depth of tests/."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_DOCS = ROOT / "sample_docs"
SHARED_EVAL = ROOT / "data" / "eval"
TEST_DATA = ROOT / "tests" / "data"
