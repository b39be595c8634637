"""The whole-array BM25 build gives the very index bm25s builds, and each term's document frequency."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import bm25s
import numpy as np
import pytest

from crag.retrieval.search.bm25_build import build_bm25


def _scores_by_pair(bm25: bm25s.BM25) -> dict[tuple[str, int], float]:
    term_of = {i: t for t, i in bm25.vocab_dict.items()}
    indptr, indices, data = (bm25.scores[k] for k in ("indptr", "indices", "data"))
    return {
        (term_of[col], int(indices[j])): float(data[j])
        for col in range(len(indptr) - 1)
        for j in range(indptr[col], indptr[col + 1])
    }


def _corpus(seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    # A few very common terms and a long tail, documents of very different lengths, one empty.
    words = [f"w{i}" for i in range(400)] + ["有給", "休暇", "繰越"]
    docs = [
        [rng.choice(words[: rng.choice((5, 50, 403))]) for _ in range(rng.randint(1, 60))] for _ in range(300)
    ]
    docs[17] = []
    return docs


@pytest.mark.parametrize("seed", [1, 2])
def test_same_scores_and_document_frequencies_as_bm25s(seed: int) -> None:
    tokens = _corpus(seed)
    theirs = bm25s.BM25()
    theirs.index(tokens, show_progress=False)
    ours, doc_freq = build_bm25(tokens)

    assert set(ours.vocab_dict) == set(theirs.vocab_dict)  # the empty token included
    assert _scores_by_pair(ours) == _scores_by_pair(theirs)  # exactly, not approximately
    assert ours.scores["num_docs"] == theirs.scores["num_docs"] == len(tokens)
    counted: Counter[str] = Counter()
    for doc in tokens:
        counted.update(set(doc))
    assert doc_freq == dict(counted)
    for query in (["w0", "w3"], ["有給", "休暇"], ["w399", "w0", "unknown"]):
        known = [t for t in query if t in doc_freq]
        assert np.array_equal(ours.get_scores(known), theirs.get_scores(known))


def test_the_built_index_saves_and_loads_as_bm25s_own(tmp_path: Path) -> None:
    tokens = _corpus(3)
    ours, _ = build_bm25(tokens)
    ours.save(str(tmp_path / "bm25"), show_progress=False)
    loaded = bm25s.BM25.load(str(tmp_path / "bm25"), mmap=True, show_progress=False)
    assert np.array_equal(loaded.get_scores(["w1", "繰越"]), ours.get_scores(["w1", "繰越"]))
    best = int(np.argmax(loaded.get_scores(["繰越"])))
    assert "繰越" in tokens[best]


def test_no_documents_is_an_error_not_an_empty_matrix() -> None:
    with pytest.raises(ValueError):
        build_bm25([])


def test_chunks_without_a_single_term_still_make_an_index() -> None:
    # Chunks of stop words and symbols only: bm25s itself fails on these (max() of an empty vocabulary).
    bm25, doc_freq = build_bm25([[], []])
    assert doc_freq == {}
    assert bm25.scores["num_docs"] == 2
    assert len(bm25.scores["indptr"]) == 1
