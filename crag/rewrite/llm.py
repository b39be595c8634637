"""Query rewriting with the language model, history-aware; the local keyword rewrite on failure."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from crag import trace
from crag.llm import prompts
from crag.llm.client import LlmClient, LlmUnavailable
from crag.models import Notice, Turn
from crag.protocols import QueryRewriter

log = logging.getLogger(__name__)


class LlmRewriter:
    name = "llm-rewrite"

    def __init__(self, llm: LlmClient, fallback: QueryRewriter) -> None:
        self._llm = llm
        self._fallback = fallback

    async def rewrite(self, question: str, history: Sequence[Turn]) -> str:
        return await self._ask(prompts.REWRITE, question, history, self._fallback.rewrite)

    async def rewrite_for_web(self, question: str, history: Sequence[Turn]) -> str:
        return await self._ask(prompts.WEB_REWRITE, question, history, self._fallback.rewrite_for_web)

    async def rewrite_missing(
        self, question: str, history: Sequence[Turn], missing: Sequence[str], used: Sequence[str]
    ) -> list[str]:
        fence = prompts.Fence()
        user = (
            "Earlier conversation:\n"
            f"{prompts.history_block([(t.question, t.answer) for t in history], fence)}\n\n"
            f"Question: {question}\n"
            f"Not answered by the documents found so far: {'; '.join(missing)}\n"
            f"Searches already made: {' | '.join(used)}"
        )
        try:
            reply = await self._llm.chat(prompts.RESEARCH, user, max_tokens=80)
        except LlmUnavailable as exc:
            log.warning("re-search keywords fell back to local keywords: %s", exc)
            trace.current().notice(Notice.LLM_FALLBACK)
            return await self._fallback.rewrite_missing(question, history, missing, used)
        line = " ".join(reply.strip().strip('"「」').split())[:300]
        return [line] if line and line.upper() != "NONE" and line not in used else []

    async def _ask(self, system: str, question: str, history: Sequence[Turn], fallback) -> str:  # type: ignore[no-untyped-def]
        user = (
            "Earlier conversation:\n"
            f"{prompts.history_block([(t.question, t.answer) for t in history], prompts.Fence())}\n\n"
            f"Question: {question}"
        )
        try:
            reply = await self._llm.chat(system, user, max_tokens=80)
        except LlmUnavailable as exc:
            log.warning("rewrite fell back to local keywords: %s", exc)
            trace.current().notice(Notice.LLM_FALLBACK)
            return str(await fallback(question, history))
        line = " ".join(reply.strip().strip('"「」').split())
        return line[:300] or str(await fallback(question, history))
