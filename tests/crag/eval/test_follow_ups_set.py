"""The follow-ups evaluation set (data/eval/follow-ups/): loadable, every question has its earlier turn,
and every gold is in its document."""

from __future__ import annotations

import pytest

from crag.eval.dataset import load_dataset
from tests.crag.eval.eval_sets import rows_with_golds_in_documents
from tests.paths import ROOT

SET = ROOT / "data" / "eval" / "follow-ups"


@pytest.mark.parametrize("name", ["fit-minami", "fit-hokuyo"])
def test_each_half_loads_over_its_corpus_with_its_history_and_golds(name: str) -> None:
    folder = SET / name
    assert (folder / "corpus").resolve() == (ROOT / "data" / "eval" / name / "corpus").resolve()
    dataset = load_dataset(folder)
    assert len(dataset.questions) == 30
    assert all(q.kind == "follow_up" and q.history for q in dataset.questions)
    rows = rows_with_golds_in_documents(folder)
    forms = [line.split("\t") for line in (folder / "forms.tsv").read_text("utf-8").splitlines()]
    assert [f[0] for f in forms] == [r["id"] for r in rows]
