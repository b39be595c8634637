"""Query rewriting with the language model, history-aware; the local keyword rewrite on failure."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from crag.core.models import Notice, Turn
from crag.core.protocols import QueryRewriter
from crag.providers.llm import prompts
from crag.providers.llm.client import LlmClient, LlmUnavailable
from crag.tracing import turn_trace

log = logging.getLogger(__name__)


class LlmRewriter:
    name = "llm-rewrite"

    def __init__(self, llm: LlmClient, fallback: QueryRewriter, web_rewrite: bool = True) -> None:
        self._llm = llm
        self._fallback = fallback
        self._web_rewrite = web_rewrite

    async def rewrite(self, question: str, history: Sequence[Turn]) -> str:
        return await self._ask(prompts.REWRITE, question, history, self._fallback.rewrite)

    async def rewrite_for_web(self, question: str, history: Sequence[Turn]) -> str:
        if not self._web_rewrite:
            # The web search starts with the turn (speculative_web) and would otherwise wait a model
            # call for its query: the local reading costs a millisecond and no call.
            return await self._fallback.rewrite_for_web(question, history)
        return await self._ask(prompts.WEB_REWRITE, question, history, self._fallback.rewrite_for_web)

    def standalone(self, question: str, history: Sequence[Turn]) -> str:
        # The local reading: the model rewrites the search itself with the whole history, and
        # grading and the answer need no second call to know what a follow-up asks.
        return self._fallback.standalone(question, history)

    def may_lean(self, question: str, history: Sequence[Turn]) -> bool:
        return self._fallback.may_lean(question, history)

    def with_previous(self, question: str, history: Sequence[Turn]) -> str:
        return self._fallback.with_previous(question, history)

    async def rewrite_missing(
        self, question: str, history: Sequence[Turn], missing: Sequence[str], used: Sequence[str]
    ) -> list[str]:
        asked = (
            f"{question}\n"
            f"Not answered by the documents found so far: {'; '.join(missing)}\n"
            f"Searches already made: {' | '.join(used)}"
        )
        line = await self._chat(prompts.RESEARCH, asked, history)
        if line is None:
            return await self._fallback.rewrite_missing(question, history, missing, used)
        return [line] if line and line.upper() != "NONE" and line not in used else []

    async def _ask(self, system: str, question: str, history: Sequence[Turn], fallback) -> str:  # type: ignore[no-untyped-def]
        line = await self._chat(system, question, history)
        return line or str(await fallback(question, history))

    async def _chat(self, system: str, question: str, history: Sequence[Turn]) -> str | None:
        """The model's one-line reply, normalised; None when the model is unavailable."""
        user = (
            "Earlier conversation:\n"
            f"{prompts.history_block([(t.question, t.answer) for t in history], prompts.Fence())}\n\n"
            f"Question: {question}"
        )
        try:
            reply = await self._llm.chat(system, user, max_tokens=80)
        except LlmUnavailable as exc:
            log.warning("rewrite fell back to local keywords: %s", exc)
            turn_trace.current().notice(Notice.LLM_FALLBACK)
            return None
        return " ".join(reply.strip().strip('"「」').split())[:300]
