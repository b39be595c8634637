"""The CRAG flow, top to bottom: rewrite -> retrieve -> grade -> decide -> [web] -> generate.

The engine only sees the provider protocols; which LLM, index or web search is behind them is the
factory's business. Every turn returns one CragResult, whatever fails along the way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from crag import trace
from crag.breaker import CircuitBreaker
from crag.cache import AnswerCache
from crag.models import Branch, CragResult, GradedChunk, Turn, WebOutcome, WebStatus
from crag.protocols import (
    AnswerGenerator,
    Grader,
    KnowledgeRefiner,
    QueryRewriter,
    Retriever,
    StageSink,
    TextSink,
    WebSearch,
)
from crag.refine.passthrough import PassThroughRefiner
from crag.text.lang import detect_language

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EngineConfig:
    upper: float = 0.8
    lower: float = 0.4
    top_k: int = 10
    web_results: int = 5
    # Start the web search before grading decides it is needed (saves its latency on the
    # ambiguous and incorrect branches; costs a web search on the correct one).
    speculative_web: bool = False


def decide(graded: Sequence[GradedChunk], upper: float, lower: float) -> tuple[Branch, list[GradedChunk]]:
    """The CRAG branch and the chunks it keeps (best first)."""
    ranked = sorted(graded, key=lambda g: -g.score)
    if ranked and ranked[0].score >= upper:
        return Branch.CORRECT, [g for g in ranked if g.score >= upper]
    kept = [g for g in ranked if g.score >= lower]
    return (Branch.AMBIGUOUS if kept else Branch.INCORRECT), kept


class CragEngine:
    def __init__(
        self,
        rewriter: QueryRewriter,
        retriever: Retriever,
        grader: Grader,
        web: WebSearch,
        generator: AnswerGenerator,
        config: EngineConfig | None = None,
        refiner: KnowledgeRefiner | None = None,
        closers: Sequence[Callable[[], Awaitable[None]]] = (),
        cache: AnswerCache | None = None,
    ) -> None:
        self.rewriter = rewriter
        self.retriever = retriever
        self.grader = grader
        self.web = web
        self.generator = generator
        self.config = config or EngineConfig()
        self.refiner: KnowledgeRefiner = refiner or PassThroughRefiner()
        self._closers = list(closers)
        self.cache = cache
        # A dead index or web search is skipped for a while instead of timing out every turn.
        self.search_breaker = CircuitBreaker()
        self.web_breaker = CircuitBreaker()

    async def close(self) -> None:
        """Release the providers' connections (LLM and search clients)."""
        for close in self._closers:
            try:
                await close()
            except Exception:
                log.warning("error while closing a provider", exc_info=True)

    @property
    def providers(self) -> dict[str, str]:
        return {
            "rewrite": self.rewriter.name,
            "search": self.retriever.name,
            "grade": self.grader.name,
            "web": self.web.name,
            "refine": self.refiner.name,
            "generate": self.generator.name,
        }

    async def run(
        self,
        question: str,
        history: Sequence[Turn] = (),
        on_stage: StageSink | None = None,
        on_text: TextSink | None = None,
    ) -> CragResult:
        """One CRAG turn. on_stage hears each stage as it starts and on_text the answer as it is
        written, for clients that show progress; neither changes the result."""
        if self.cache is not None:
            cached = self.cache.get(question, history)
            if cached is not None:
                cached.timings_ms = {"cache": 0.0, "total": 0.0}
                return cached
        with trace.turn_trace() as turn:
            result = await self._run(question, history, turn, on_stage or _ignore, on_text)
        if self.cache is not None:
            self.cache.put(question, history, result)
        return result

    async def _run(
        self,
        question: str,
        history: Sequence[Turn],
        turn: trace.TurnTrace,
        stage: StageSink,
        on_text: TextSink | None,
    ) -> CragResult:
        timings: dict[str, float] = {}
        clock = _Clock(timings)
        started = time.perf_counter()
        language = detect_language(question)

        await stage("searching")
        # The web search does not depend on the documents: start it now, while documents are
        # searched and graded, and drop it if they turn out to answer the question.
        speculative = (
            asyncio.create_task(self._search_web(question, history)) if self.config.speculative_web else None
        )
        try:
            with clock("rewrite"):
                query = await self.rewriter.rewrite(question, history)
            with clock("retrieve"):
                candidates = await self._retrieve(query, question, turn)
            await stage("grading")
            with clock("grade"):
                # Refinement of long passages runs alongside grading, so it adds no round trip.
                refining = asyncio.create_task(self.refiner.refine(question, candidates, []))
                graded = await self._grade(question, candidates)
            branch, kept = decide(graded, self.config.upper, self.config.lower)
            for g in kept:
                g.kept = True

            web = WebOutcome(status=WebStatus.NOT_NEEDED)
            web_query = ""
            if branch is not Branch.CORRECT:
                await stage("web")
                with clock("web"):
                    web_query, web = await (speculative or self._search_web(question, history))
            elif speculative is not None:
                speculative.cancel()

            await stage("writing")
            with clock("refine"):
                # Refined texts, on the kept chunks with their final grades (refining started before them).
                refined = {g.chunk.id: g.chunk for g in (await refining)[0]}
                knowledge = [
                    g.model_copy(update={"chunk": refined[g.chunk.id]}) for g in kept if g.chunk.id in refined
                ]
                _, web_knowledge = await self.refiner.refine(question, [], web.results)
        finally:
            if speculative is not None and not speculative.done():
                speculative.cancel()
        with clock("generate"):
            answer = await self.generator.generate(question, language, knowledge, web_knowledge, on_text)
        timings["total"] = round((time.perf_counter() - started) * 1000, 2)
        return CragResult(
            question=question,
            language=language,
            queries=[query],
            web_query=web_query,
            branch=branch,
            graded=graded,
            web=web,
            answer=answer.text,
            refused=answer.refused,
            citations=answer.citations,
            followups=answer.followups,
            notices=list(turn.notices),
            timings_ms=timings,
            llm_calls=turn.llm_calls,
            llm_tokens=turn.tokens,
            providers=self.providers,
        )

    async def _search_web(self, question: str, history: Sequence[Turn]) -> tuple[str, WebOutcome]:
        query = await self.rewriter.rewrite_for_web(question, history)
        if not self.web_breaker.allow():
            return query, WebOutcome(
                status=WebStatus.FAILED, message="Web search is temporarily unavailable."
            )
        outcome = await self.web.search(query, self.config.web_results)
        if outcome.status is WebStatus.FAILED:
            self.web_breaker.failure()
        elif outcome.status is WebStatus.OK:
            self.web_breaker.success()
        return query, outcome

    async def _retrieve(self, query: str, question: str, turn: trace.TurnTrace) -> list[GradedChunk]:
        if not self.search_breaker.allow():
            turn.notice("search_failed")
            return []
        try:
            found = await self.retriever.search(query, self.config.top_k, question)
            self.search_breaker.success()
            return found
        except Exception as exc:
            self.search_breaker.failure()
            # An unreachable index leaves nothing to grade: the turn goes to the web and says why.
            # Only the class name: a client exception can carry a URL with credentials in it.
            log.warning("document search failed (%s); continuing without documents", type(exc).__name__)
            turn.notice("search_failed")
            return []

    async def _grade(self, question: str, candidates: list[GradedChunk]) -> list[GradedChunk]:
        if not candidates:
            return []
        try:
            scores = await self.grader.grade(question, [g.chunk for g in candidates])
        except Exception:
            # A failed grade counts as 0.0 (not relevant): the turn goes on towards the web.
            log.exception("grading failed; treating %d chunks as irrelevant", len(candidates))
            scores = [0.0] * len(candidates)
        if len(scores) != len(candidates):
            log.error("grader returned %d scores for %d chunks", len(scores), len(candidates))
            scores = [*scores, *[0.0] * len(candidates)][: len(candidates)]
        for g, s in zip(candidates, scores, strict=True):
            g.score = min(1.0, max(0.0, float(s)))
        return candidates


async def _ignore(stage: str) -> None:
    return None


class _Clock:
    """Accumulates wall time per stage in milliseconds."""

    def __init__(self, timings: dict[str, float]) -> None:
        self._timings = timings
        self._stage = ""
        self._start = 0.0

    def __call__(self, stage: str) -> _Clock:
        self._stage = stage
        return self

    def __enter__(self) -> None:
        self._start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        elapsed = (time.perf_counter() - self._start) * 1000
        self._timings[self._stage] = round(self._timings.get(self._stage, 0.0) + elapsed, 2)


__all__ = ["CragEngine", "EngineConfig", "decide"]
