"""The asker-numbers evaluation set (eval/asker-numbers/): loadable, and every gold is in its document."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

from crag.eval.dataset import load_dataset

ROOT = Path(__file__).resolve().parent.parent
SET = ROOT / "eval" / "asker-numbers"


@pytest.mark.parametrize("name", ["sample-docs", "fit-hokuyo"])
def test_each_half_loads_over_its_corpus_and_its_golds_are_in_their_documents(name: str) -> None:
    folder = SET / name
    assert (folder / "corpus").resolve() == (ROOT / "eval" / name / "corpus").resolve()
    dataset = load_dataset(folder)
    assert len(dataset.questions) == 18
    rows = [json.loads(line) for line in (folder / "questions.jsonl").read_text("utf-8").splitlines()]
    assert len({r["id"] for r in rows}) == len(rows)
    assert sum(r["lang"] == "ja" for r in rows) == 9
    for row in rows:
        text = unicodedata.normalize("NFKC", (folder / "corpus" / row["gold_file"]).read_text("utf-8"))
        assert row["answers"], row["id"]
        for gold in row["answers"]:
            assert unicodedata.normalize("NFKC", gold) in text, (row["id"], gold)
