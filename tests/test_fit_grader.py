"""bench/fit_grader.py's choice of the lower anchor (floor): where showing passages gains most."""

from __future__ import annotations

import numpy as np

from bench.fit_grader import floor


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
