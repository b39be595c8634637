"""Where LLM-judge metrics plug in when a generative model is configured.

A judge rates one answered question (groundedness, relevance, similarity to the gold answer, 1-5)
and, with embeddings, the cosine similarity to the gold answer. The runner asks `available_judges`
for the judges the settings allow and averages what each returns into metrics.json under
"judge.<name>". With the local providers there is no model to judge with, so none is returned and
those metrics are absent rather than invented.
"""

from __future__ import annotations

from typing import Protocol

from crag.models import CragResult
from crag.settings import CragSettings


class AnswerJudge(Protocol):
    name: str

    async def judge(self, result: CragResult, gold_answers: list[str]) -> dict[str, float]:
        """Metric name -> value for one answered question."""
        ...


def available_judges(settings: CragSettings) -> list[AnswerJudge]:
    # The OpenAI-compatible judges arrive with the LLM provider; until then there are none.
    return []
