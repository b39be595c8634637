"""The asker-numbers evaluation set (data/eval/asker-numbers/):
loadable, and every gold is in its document."""

from __future__ import annotations

import pytest

from crag.eval.dataset import load_dataset
from tests.crag.eval.eval_sets import rows_with_golds_in_documents
from tests.paths import ROOT

SET = ROOT / "data" / "eval" / "asker-numbers"


@pytest.mark.parametrize("name", ["sample-docs", "fit-hokuyo"])
def test_each_half_loads_over_its_corpus_and_its_golds_are_in_their_documents(name: str) -> None:
    folder = SET / name
    assert (folder / "corpus").resolve() == (ROOT / "data" / "eval" / name / "corpus").resolve()
    dataset = load_dataset(folder)
    assert len(dataset.questions) == 18
    rows = rows_with_golds_in_documents(folder)
    assert sum(r["lang"] == "ja" for r in rows) == 9
