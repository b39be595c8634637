"""The CRAG routing rule, in one place: the engine routes with it and the eval sweep replays it."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from crag.models import Branch, GradedChunk


class RoutingPolicy(BaseModel):
    """correct: the best passage is graded >= upper (and every part of the question has such a
    passage); ambiguous: some passage >= lower; incorrect: none."""

    model_config = ConfigDict(frozen=True)

    upper: float = 0.8
    lower: float = 0.4

    def branch(self, scores: Sequence[float], missing_parts: Sequence[str] = ()) -> Branch:
        best = max(scores, default=0.0)
        if best >= self.upper and not missing_parts:
            return Branch.CORRECT
        return Branch.AMBIGUOUS if best >= self.lower else Branch.INCORRECT

    def decide(
        self, graded: Sequence[GradedChunk], missing_parts: Sequence[str] = ()
    ) -> tuple[Branch, list[GradedChunk]]:
        """The branch and the passages an answer is written from (best first, marked kept): on the
        correct branch those >= upper, otherwise those >= lower."""
        branch = self.branch([g.score for g in graded], missing_parts)
        floor = self.upper if branch is Branch.CORRECT else self.lower
        ranked = sorted(graded, key=lambda g: -g.score)
        return branch, [g.model_copy(update={"kept": True}) for g in ranked if g.score >= floor]

    def needs_web(self, branch: Branch) -> bool:
        """Whether the answer on this branch is written with web results (every branch but correct)."""
        return branch is not Branch.CORRECT

    def covers(self, best: float) -> bool:
        """Does a passage graded `best` answer this (part of the) question?"""
        return best >= self.upper
