"""Checks shared by the tests of the project's own evaluation sets."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any


def rows_with_golds_in_documents(folder: Path) -> list[dict[str, Any]]:
    """The set's questions as written, after asserting that their ids are unique and that every
    question has gold answers, each found (NFKC) in its gold file under the set's corpus/."""
    rows = [json.loads(line) for line in (folder / "questions.jsonl").read_text("utf-8").splitlines()]
    assert len({r["id"] for r in rows}) == len(rows)
    for row in rows:
        text = unicodedata.normalize("NFKC", (folder / "corpus" / row["gold_file"]).read_text("utf-8"))
        assert row["answers"], row["id"]
        for gold in row["answers"]:
            assert unicodedata.normalize("NFKC", gold) in text, (row["id"], gold)
    return rows
