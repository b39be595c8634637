"""Knowledge refinement (CRAG): keep only the sentences of long passages that bear on the question."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from crag.core.models import GradedChunk, Notice, WebResult
from crag.providers.llm import prompts
from crag.providers.llm.client import LlmClient, LlmUnavailable
from crag.tracing import turn_trace

log = logging.getLogger(__name__)


class LlmRefiner:
    name = "llm-refine"

    def __init__(self, llm: LlmClient, min_chars: int = 600) -> None:
        self._llm = llm
        self._min_chars = min_chars

    async def refine(
        self, question: str, chunks: Sequence[GradedChunk], web: Sequence[WebResult]
    ) -> tuple[list[GradedChunk], list[WebResult]]:
        # Only long passages are worth a call; all of them are refined at once.
        texts = [g.chunk.text for g in chunks] + [w.snippet for w in web]
        refined = await asyncio.gather(*(self._strip(question, t) for t in texts))
        out_chunks = [
            g.model_copy(update={"chunk": g.chunk.model_copy(update={"text": r})})
            for g, r in zip(chunks, refined[: len(chunks)], strict=True)
            if r
        ]
        out_web = [
            w.model_copy(update={"snippet": r}) for w, r in zip(web, refined[len(chunks) :], strict=True) if r
        ]
        return out_chunks, out_web

    async def _strip(self, question: str, text: str) -> str:
        if len(text) < self._min_chars:
            return text
        try:
            reply = await self._llm.chat(
                prompts.REFINE,
                f"Question: {question}\n\nPassage:\n{prompts.Fence().wrap(text)}",
                max_tokens=600,
            )
        except LlmUnavailable as exc:
            log.warning("refinement skipped: %s", exc)
            turn_trace.current().notice(Notice.LLM_FALLBACK)
            return text
        reply = reply.strip()
        if reply.upper().startswith("NONE"):
            return ""
        # A refinement must come from the passage; anything else (a summary, an injection) is discarded.
        return reply if mostly_copied(reply, text) else text


def mostly_copied(extract: str, source: str) -> bool:
    pieces = [p for p in extract.replace("\n", "。").split("。") if p.strip()]
    if not pieces:
        return False
    copied = sum(1 for p in pieces if p.strip()[:20] in source)
    return copied / len(pieces) >= 0.6
