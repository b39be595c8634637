"""The refiner used without a language model, and the engine's default: passages pass unchanged."""

from __future__ import annotations

from collections.abc import Sequence

from crag.core.models import GradedChunk, WebResult


class PassThroughRefiner:
    """The extractive composer already picks the relevant sentences: nothing to do here."""

    name = "none"

    async def refine(
        self, question: str, chunks: Sequence[GradedChunk], web: Sequence[WebResult]
    ) -> tuple[list[GradedChunk], list[WebResult]]:
        return list(chunks), list(web)
