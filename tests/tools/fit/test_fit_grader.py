"""tools/fit/fit_grader.py's choice of the lower anchor (floor): where showing passages gains most."""

from __future__ import annotations

import numpy as np

from tools.fit.fit_grader import floor, leads, lower_as_shipped, ranked_fit


def test_floor_stops_where_unanswerable_questions_would_cost_more_than_it_gains() -> None:
    # Best-chunk logits: four answerable questions whose chunk holds the answer, one whose best chunk
    # does not, three the corpus cannot answer.
    z = np.array([1.5, -0.5, -1.0, -2.0, -1.2, -0.8, -3.0, -3.5])
    inside = np.array([True, True, True, True, True, False, False, False])
    holds = np.array([True, True, True, True, False, False, False, False])
    lower = floor(z, inside, holds, upper=1.0)
    # Down to -2.0 it gains three answers (-0.5, -1.0, -2.0) for one unanswerable question (-0.8);
    # lower still only unanswerable questions (and one whose chunk lacks the answer) are reached.
    assert -2.05 < lower <= -2.0


def test_floor_takes_the_highest_of_equal_gains_and_stays_at_upper_when_nothing_gains() -> None:
    z = np.array([-1.0, -2.0, -3.0])
    inside = np.array([True, False, True])
    holds = np.array([True, False, True])
    # -1.0 gains one; -3.0 gains one more for one unanswerable question: a tie, the higher floor wins.
    assert -1.05 < floor(z, inside, holds, upper=1.0) <= -1.0
    nothing = np.array([False, False, False])
    assert floor(z, nothing, nothing, upper=1.0) == 1.0


def _rows_where_pointwise_misranks() -> dict[str, list[tuple[bool, list[tuple[list[float], bool]]]]]:
    """Feature 0 is high on every chunk of the questions no chunk answers, and, within an answerable
    question, higher on its answer chunk: across all chunks it marks non-answers, within a question
    the answer. Feature 1 is noise."""
    rng = np.random.default_rng(3)
    rows = []
    for _ in range(60):
        chunks = [([4.0 + rng.normal(0, 0.3), rng.normal()], False) for _ in range(5)]
        rows.append((True, chunks))
    for _ in range(30):
        chunks = [([1.0, rng.normal()], True)] + [([0.0, rng.normal()], False) for _ in range(4)]
        rows.append((True, chunks))
    return {"set": rows}


def test_ranked_fit_puts_the_answer_chunk_first_where_the_per_chunk_fit_does_not() -> None:
    data = _rows_where_pointwise_misranks()
    pointwise = ranked_fit(data, rank_weight=0.0)
    ranked = ranked_fit(data, rank_weight=1.0)
    assert leads(pointwise, data["set"]) < 0.5
    assert leads(ranked, data["set"]) == 1.0


def test_lower_as_shipped_keeps_as_many_answer_chunks_as_the_shipped_model(monkeypatch) -> None:
    import crag.stages.grade.local as local

    rows = [
        (True, [([2.0], True), ([0.0], False)]),
        (True, [([1.0], True)]),
        (True, [([-1.0], True)]),
        (False, [([0.5], False)]),
    ]
    # The shipped model's logit is x, its lower anchor 0.0: two answer chunks kept (2.0 and 1.0).
    monkeypatch.setattr(local, "SEMANTIC", local.Model(weights=(1.0,), bias=0.0, upper=3.0, lower=0.0))
    # A refit at half the scale must go down to 0.5 to keep the same two.
    lower = lower_as_shipped(np.array([0.5, 0.0]), {"set": rows}, semantic=True)
    assert 0.45 < lower <= 0.5
