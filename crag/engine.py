"""The CRAG flow, one turn, as explicit steps over an immutable state:

    rewrite -> retrieve -> grade -> route -> (re-search -> route)* -> [web] -> refine -> generate

Each step is a small method taking the turn's state and returning a new one; `_run` lists them in order
and is the whole flow. Routing (Thresholds, crag/core/models.py) decides the branch. Re-search runs
while a part of the question has no answering passage, or the best passage is only ambiguous, and the
rewriter has a query not tried yet: at most `research_rounds` times. In a conversation, a question that
seemed to stand alone and found nothing (or, too short to tell, only a partial answer) is first read
after the previous question (a subject left unsaid), kept only when that reading answers better and
bears on the question's own words too. The engine only sees the provider protocols; which LLM, index or
web search is behind them is the factory's business. Every turn returns one CragResult, whatever fails
along the way. Each step is also a span of the turn's OpenTelemetry trace (crag/tracing/turn_trace.py): `step`
times it and says on it what it found (counts and grades, never text). Tracing is off unless the app
configured it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Literal

from opentelemetry.trace import Span

from crag.cache.answer_cache import AnswerCache
from crag.core import access
from crag.core.access import Reader
from crag.core.models import (
    Branch,
    Chunk,
    CragResult,
    GeneratedAnswer,
    GradedChunk,
    Notice,
    Stage,
    Thresholds,
    Turn,
    WebOutcome,
    WebResult,
    WebStatus,
)
from crag.core.passthrough import PassThroughRefiner
from crag.core.protocols import (
    AnswerGenerator,
    AnswerRequest,
    ExtractingGrader,
    Grader,
    KnowledgeRefiner,
    QueryRewriter,
    Retriever,
    StageSink,
    TextSink,
    TopicalGrader,
    TurnStopped,
    WebSearch,
)
from crag.outbound.breaker import CircuitBreaker
from crag.text.lang import detect_language
from crag.text.parts import question_parts, read_in_context
from crag.tracing import spans, turn_trace

log = logging.getLogger(__name__)

# A question read after the previous one must still find some evidence of its own in a passage kept that
# way: graded against the question alone, not about 0 (no evidence) but not necessarily the lower
# threshold (the subject it leaves unsaid is what the previous question gives). Measured on fit-minami,
# fit-hokuyo and sample-docs with every question asked after the one before it: the two follow-ups that
# need the reading reach 0.13 and 0.39 alone. Of the 43 questions the documents do not answer that went to
# no document, 39 stay there; without this floor, 27 of them were answered from the previous topic's
# passages ("who wrote Romeo and Juliet?" with the hotel-points rule).
OWN_EVIDENCE = 0.1

# A passage whose topic grade (TopicalGrader.topic: the feature grader's words and meaning in common)
# reaches this is on the question's topic: when such passages are found and none answers, the answer
# says the documents don't state it. Chosen on fit-minami (a fitting set) with the feature grader: the
# best passage of its off-topic questions grades at most 0.12 for 9 in 10, that of its questions whose
# topic the documents mention (fact absent) at least 0.34 for 9 in 10.
TOPIC = 0.3


@dataclass(frozen=True)
class EngineConfig:
    thresholds: Thresholds = field(default_factory=Thresholds)
    top_k: int = 10
    web_results: int = 5
    # Start the web search before grading decides it is needed (saves its latency on the
    # ambiguous and incorrect branches; costs a web search on the correct one).
    speculative_web: bool = False
    # Extra document searches for what the first one did not cover (at most 3 in all).
    research_rounds: int = 2
    # Retry an only-ambiguous best passage with new keywords (parts left unanswered are searched for
    # regardless). Off by default when a web search fills the gap: there the retry costs a rewrite
    # and a grading round (about +550 ms on the LLM path in bench_turns) and changed no branch.
    research_ambiguous: bool = True
    # Passages of each search refined early, in search order (the rest are used as they are).
    refine_top: int = 3
    # Those passages' refinement copied out by their grading calls (an ExtractingGrader), instead of
    # a model call each beside them: 12 calls a turn instead of 15, the extract after the score.
    extract_in_grading: bool = False
    # The question's text on the turn's span (CRAG_TRACE_QUESTIONS): off, traces hold no user text.
    trace_question: bool = False


@dataclass(frozen=True)
class TurnState:
    """What the turn knows so far. Steps return a new state (dataclasses.replace), never mutate."""

    question: str
    history: tuple[Turn, ...]
    language: Literal["ja", "en"]
    parts: tuple[str, ...]  # the question's parts; one when it asks for one thing
    standalone: str = ""  # the question as read with the turn it leans on (itself when self-contained)
    queries: tuple[str, ...] = ()  # every document search made
    searched: tuple[GradedChunk, ...] = ()  # the last search's new passages, not graded yet
    graded: tuple[GradedChunk, ...] = ()
    part_best: tuple[float, ...] = ()  # each part's best passage grade so far (multi-part questions)
    missing: tuple[str, ...] = ()  # parts no passage answers
    branch: Branch = Branch.INCORRECT
    kept: tuple[GradedChunk, ...] = ()
    rounds: int = 0  # re-searches made
    tried_previous: bool = False  # read after the previous question (nothing found for it alone)
    exhausted: bool = False  # the rewriter had no new query
    web_query: str = ""
    web: WebOutcome = field(default_factory=lambda: WebOutcome(status=WebStatus.NOT_NEEDED))
    knowledge: tuple[GradedChunk, ...] = ()
    web_knowledge: tuple[WebResult, ...] = ()
    answer: GeneratedAnswer | None = None


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
        self.extracting = (
            grader if self.config.extract_in_grading and isinstance(grader, ExtractingGrader) else None
        )
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
        reader: Reader | None = None,
        attributes: spans.Attributes | None = None,
    ) -> CragResult:
        """One CRAG turn. on_stage hears each stage as it starts and on_text the answer as it is
        written, for clients that show progress; neither changes the result. With a reader (access
        trimming, crag/core/access.py) every document search holds only what the reader may read, and
        cached answers are those of readers with the very same permissions. attributes describe
        the turn on its span (the channel it came from)."""
        scope = access.scope(reader)
        with turn_trace.turn_trace(self.span_attributes(question, attributes)) as turn:
            if self.cache is not None:
                cached = await self.cache.get(question, history, scope)
                if cached is not None:
                    cached.timings_ms = {"cache": 0.0, "total": 0.0}
                    cached.cache_hit = True
                    turn.record(cached, cache_hit=True)
                    return cached
            try:
                result = await _Turn(self, turn, on_stage or _ignore, on_text, reader).run(question, history)
            except TurnStopped:
                turn.stopped()
                raise
            turn.record(result, cache_hit=False)
            if self.cache is not None:
                await self.cache.put(question, history, result, scope)
        return result

    def span_attributes(
        self, question: str, given: Mapping[str, spans.AttributeValue] | None
    ) -> dict[str, spans.AttributeValue]:
        if not spans.enabled():
            return {}
        out = {**(given or {}), "crag.question_chars": len(question)}
        if self.config.trace_question:
            out["crag.question"] = question
        return out


class _Turn:
    """One run of the flow: the steps, and the bookkeeping they share (timings, stage reports,
    the speculative web search and the refinement running beside grading)."""

    def __init__(
        self,
        engine: CragEngine,
        turn: turn_trace.TurnTrace,
        on_stage: StageSink,
        on_text: TextSink | None,
        reader: Reader | None,
    ) -> None:
        self.e = engine
        self.turn = turn
        self.on_stage = on_stage
        self.on_text = on_text
        self.reader = reader  # every search of the turn (re-searches too) is trimmed to it
        self.timings: dict[str, float] = {}
        self.web_task: asyncio.Task[tuple[str, WebOutcome]] | None = None
        self.web_reading = ""  # the reading of the question the web task searches for
        self.refined: dict[str, Chunk] = {}
        self.sent_to_refine: set[str] = set()
        self.to_extract: set[str] = set()  # sent to refinement, copied out by their grading call
        self.refining: list[asyncio.Task[tuple[list[GradedChunk], list[WebResult]]]] = []

    async def run(self, question: str, history: Sequence[Turn]) -> CragResult:
        started = time.perf_counter()
        # A follow-up ("what about the plants?") is graded and answered as read with the question
        # it leans on; a self-contained question as it is.
        standalone = self.e.rewriter.standalone(question, history)
        parts = tuple(read_in_context(question_parts(question))) if standalone == question else (standalone,)
        s = TurnState(
            question,
            tuple(history),
            detect_language(question),
            parts,
            standalone=standalone,
            part_best=(0.0,) * len(parts),
        )
        try:
            await self.stage(Stage.SEARCHING)
            if self.e.config.speculative_web:
                # The web search does not depend on the documents: start it now, and drop it if
                # they turn out to answer the question.
                self.start_web(s)
            s = await self.step("rewrite", self.rewrite, s)
            s = await self.step("retrieve", self.retrieve, s)
            await self.stage(Stage.GRADING)
            s = await self.step("grade", self.grade, s)
            s = self.route(s)
            while self.wants_research(s):
                lean = self.wants_previous(s)
                if self.web_task is None and not lean:
                    # The web is likely needed after all: search it while the documents are searched
                    # again, so re-search adds no time to the web branches (dropped if it succeeds).
                    # Not while the question may yet be read after the previous one.
                    self.start_web(s)
                await self.stage(Stage.RESEARCHING)
                s = await self.step("research", self.lean_on_previous if lean else self.research, s)
                s = await self.step("grade", self.grade, s)
                s = self.route(s)
            if self.e.config.thresholds.needs_web(s.branch):
                await self.stage(Stage.WEB)
                s = await self.step("web", self.search_web, s)
            await self.stage(Stage.WRITING)
            s = await self.step("refine", self.refine, s)
        finally:
            for task in [self.web_task, *self.refining]:
                if task is not None and not task.done():
                    task.cancel()
        s = await self.step("generate", self.generate, s)
        self.timings["total"] = round((time.perf_counter() - started) * 1000, 2)
        return self.result(s)

    # -- the steps ---------------------------------------------------------------------------------
    async def rewrite(self, s: TurnState) -> TurnState:
        return replace(s, queries=(await self.e.rewriter.rewrite(s.question, s.history),))

    async def retrieve(self, s: TurnState) -> TurnState:
        found = await self.search(s.queries[-1], s.standalone)
        self.refine_early(s.standalone, found)
        return replace(s, searched=tuple(found))

    async def grade(self, s: TurnState) -> TurnState:
        """Grade the new passages against the question, and against each of its parts when it has
        several (which parts some passage answers decides the branch and what to search next)."""
        new = list(s.searched)
        scores = await self.scores(s.standalone, new)
        part_best, missing = s.part_best, s.missing
        per_part: list[tuple[float, ...]] = [()] * len(new)
        if len(s.parts) > 1 and new:
            by_part = [await self.scores(part, new) for part in s.parts]
            part_best = tuple(max([best, *x]) for best, x in zip(s.part_best, by_part, strict=True))
            missing = tuple(
                p for p, b in zip(s.parts, part_best, strict=True) if not self.e.config.thresholds.covers(b)
            )
            # A passage that answers one part is as relevant as it is to that part: graded against the
            # whole question it scores low (the other part's words are missing from it), and the
            # answer lost that part ("…5日; お祝い金" with the ¥30,000 passage left out at 0.28).
            per_part = list(zip(*by_part, strict=True))
            scores = [max(x, *col) for x, col in zip(scores, per_part, strict=True)]
        topics = await self.topics(s.standalone, new)
        graded = [
            *s.graded,
            *(
                g.model_copy(update={"score": x, "part_scores": parts, "topic": t})
                for g, x, parts, t in zip(new, scores, per_part, topics, strict=True)
            ),
        ]
        return replace(s, graded=tuple(graded), searched=(), part_best=part_best, missing=missing)

    def route(self, s: TurnState) -> TurnState:
        branch, kept = self.e.config.thresholds.decide(s.graded, s.missing)
        return replace(s, branch=branch, kept=tuple(kept))

    def wants_research(self, s: TurnState) -> bool:
        """Search again while something is left to find and the rewriter has a new query for it."""
        if s.exhausted or s.rounds >= self.e.config.research_rounds:
            return False
        if self.wants_previous(s):
            return True
        if not s.graded:
            return False
        # A part left unanswered is worth every round; an only-ambiguous best passage one retry with
        # new keywords (each round costs an LLM rewrite and a grading round on the LLM path).
        if s.missing:
            return True
        return self.e.config.research_ambiguous and s.branch is Branch.AMBIGUOUS and s.rounds == 0

    def wants_previous(self, s: TurnState) -> bool:
        """A question that seemed to stand alone, with nothing in the documents for it, or too short
        to tell and only partly answered: in a conversation it may leave its subject unsaid
        (「服装って何か決まってる？」 right after a question about the freezer area, 「返事くるまでどれくらい
        かかる？」 after one about installing software). Read after the previous question, it is
        searched once more."""
        if not s.history or s.tried_previous or s.standalone != s.question:
            return False
        if s.branch is Branch.INCORRECT:
            return True
        return s.branch is Branch.AMBIGUOUS and self.e.rewriter.may_lean(s.question, s.history)

    async def lean_on_previous(self, s: TurnState) -> TurnState:
        """The question read after the previous one, searched and graded, when some passage found
        that way also bears on the question's own words: read after anything, "who wrote Romeo and
        Juliet?" finds the previous topic's passages again, graded on the previous question's words."""
        read = self.route(await self.grade(await self.read_with_previous(s)))
        # Only a better answer than the question alone found: "VPN?" after a question about leave
        # finds its VPN passages alone, better graded than the leave passages read after it.
        alone = max((g.score for g in s.graded), default=0.0)
        better = bool(read.kept) and read.kept[0].score > alone
        if better and max(await self.scores(s.question, read.kept)) >= OWN_EVIDENCE:
            self.turn.notice(Notice.READ_WITH_PREVIOUS)
            return read
        # Not used: its search (the previous question's words mixed in) is not one made for this
        # answer, and the card's "Searched for" must not show it ("capital Australia / monthly
        # remote work allowance capital Australia").
        return replace(s, rounds=read.rounds, tried_previous=True)

    async def read_with_previous(self, s: TurnState) -> TurnState:
        standalone = self.e.rewriter.with_previous(s.question, s.history)
        query = await self.e.rewriter.rewrite(standalone, ())
        found = await self.search(query, standalone)
        # Every passage is graded again, against the new reading.
        ids = {g.chunk.id for g in found}
        passages = [*found, *(g for g in s.graded if g.chunk.id not in ids)]
        self.refine_early(standalone, [g for g in found if g.chunk.id not in self.sent_to_refine])
        return replace(
            s,
            standalone=standalone,
            parts=(standalone,),
            queries=(*s.queries, query),
            searched=tuple(passages),
            graded=(),
            part_best=(0.0,),
            missing=(),
            rounds=s.rounds + 1,
            tried_previous=True,
        )

    async def research(self, s: TurnState) -> TurnState:
        targets = list(s.missing) or [s.standalone]
        queries = await self.e.rewriter.rewrite_missing(s.standalone, s.history, targets, s.queries)
        queries = [q for q in queries if q not in s.queries][: len(targets)]
        if not queries:
            return replace(s, exhausted=True)
        # One query per missing part: its dense side embeds that part. A query written for several
        # parts (the LLM's) embeds itself.
        pairs = (
            zip(queries, targets, strict=True) if len(queries) == len(targets) else ((q, q) for q in queries)
        )
        found = await asyncio.gather(*(self.search(query, text) for query, text in pairs))
        seen = {g.chunk.id for g in s.graded}
        new: list[GradedChunk] = []
        for hit in (h for hits in found for h in hits):
            if hit.chunk.id not in seen:
                seen.add(hit.chunk.id)
                new.append(hit)
        self.refine_early(s.standalone, new)
        return replace(s, queries=(*s.queries, *queries), searched=tuple(new), rounds=s.rounds + 1)

    async def search_web(self, s: TurnState) -> TurnState:
        if self.web_task is not None and self.web_reading != s.standalone:
            self.web_task.cancel()  # started before the question was read after the previous one
            self.web_task = None
        web_query, outcome = await (self.web_task or self.find_on_web(s))
        self.web_task = None
        return replace(s, web_query=web_query, web=outcome)

    async def refine(self, s: TurnState) -> TurnState:
        """The kept passages' refined texts (refinement started as soon as they were found), and the
        web results'."""
        for done in await asyncio.gather(*self.refining):
            self.refined.update({g.chunk.id: g.chunk for g in done[0]})
        self.refining = []
        # A passage sent to the refiner and not returned held nothing relevant; one never sent (below
        # the first few of its search) is used as it is.
        knowledge = tuple(
            g.model_copy(update={"chunk": self.refined.get(g.chunk.id, g.chunk)})
            for g in s.kept
            if g.chunk.id in self.refined or g.chunk.id not in self.sent_to_refine
        )
        _, web_knowledge = await self.e.refiner.refine(s.standalone, [], s.web.results)
        return replace(s, knowledge=knowledge, web_knowledge=tuple(web_knowledge))

    async def generate(self, s: TurnState) -> TurnState:
        latest = s.question if s.standalone != s.question else None
        knowledge = list(s.knowledge)
        lacking = self.lacking(s)
        if lacking and not knowledge:
            # Said first that the documents don't state it, then the nearest passage, as that.
            knowledge = [max(s.graded, key=lambda g: g.topic)]
        ask = AnswerRequest(s.standalone, s.language, knowledge, list(s.web_knowledge), latest, lacking)
        answer = await self.e.generator.generate(ask, self.on_text)
        if answer.absent and s.branch is Branch.CORRECT:
            # "The documents don't state it" is never an answer from the documents alone.
            return replace(s, answer=answer, branch=Branch.AMBIGUOUS)
        return replace(s, answer=answer)

    # -- what the steps share ----------------------------------------------------------------------
    def lacking(self, s: TurnState) -> bool:
        """The documents are on the question's topic and none of their passages answers it: a grader
        that tells the two apart (TopicalGrader) graded every passage below the lower threshold and
        some passage's topic at or above TOPIC."""
        lower = self.e.config.thresholds.lower
        return (
            s.branch is Branch.INCORRECT
            and bool(s.graded)
            and max(g.score for g in s.graded) < lower
            and max(g.topic for g in s.graded) >= TOPIC
        )

    async def topics(self, question: str, passages: Sequence[GradedChunk]) -> list[float]:
        grader = self.e.grader
        if not passages or not isinstance(grader, TopicalGrader):
            return [0.0] * len(passages)
        try:
            return list(await grader.topic(question, [g.chunk for g in passages]))
        except Exception:
            log.exception("topic grading failed; the answer will not say the documents lack the fact")
            return [0.0] * len(passages)

    async def step(
        self, name: str, fn: Callable[[TurnState], Awaitable[TurnState]], s: TurnState
    ) -> TurnState:
        with self.clock(name) as span:
            s = await fn(s)
            if span.is_recording():
                span.set_attributes(step_attributes(name, s))
            return s

    @contextmanager
    def clock(self, name: str) -> Iterator[Span]:
        """Wall time per step in milliseconds, summed over rounds, and the step's span."""
        start = time.perf_counter()
        try:
            with self.turn.stage(name) as span:
                yield span
        finally:
            elapsed = (time.perf_counter() - start) * 1000
            self.timings[name] = round(self.timings.get(name, 0.0) + elapsed, 2)

    async def stage(self, stage: Stage) -> None:
        await self.on_stage(stage)

    def refine_early(self, question: str, found: Sequence[GradedChunk]) -> None:
        """Refinement of long passages runs beside grading, so it adds no round trip. Only the first
        few of a search are refined (those most likely kept): refining all ten doubled the model
        calls of a turn and, queued behind the grading calls, added a round trip."""
        first = list(found[: self.e.config.refine_top])
        if not first:
            return
        self.sent_to_refine.update(g.chunk.id for g in first)
        if self.e.extracting is not None:
            self.to_extract.update(g.chunk.id for g in first)  # by the grading call (scores())
        else:
            self.refining.append(asyncio.create_task(self.e.refiner.refine(question, first, [])))

    async def search(self, query: str, question: str) -> list[GradedChunk]:
        e = self.e
        if not e.search_breaker.allow():
            self.turn.notice(Notice.SEARCH_FAILED)
            return []
        try:
            found = await e.retriever.search(query, e.config.top_k, question, reader=self.reader)
            e.search_breaker.success()
            return found
        except Exception as exc:
            e.search_breaker.failure()
            # An unreachable index leaves nothing to grade: the turn goes to the web and says why.
            # Only the class name: a client exception can carry a URL with credentials in it.
            log.warning("document search failed (%s); continuing without documents", type(exc).__name__)
            self.turn.notice(Notice.SEARCH_FAILED)
            return []

    async def scores(self, question: str, passages: Sequence[GradedChunk]) -> list[float]:
        if not passages:
            return []
        chunks = [g.chunk for g in passages]
        extract = [g.chunk.id in self.to_extract for g in passages]
        self.to_extract -= {g.chunk.id for g in passages}
        try:
            if self.e.extracting is not None and any(extract):
                scores, extracts = await self.e.extracting.grade_extracting(question, chunks, extract)
                self.refining.append(asyncio.create_task(_extracted(passages, extract, extracts)))
            else:
                scores = await self.e.grader.grade(question, chunks)
        except Exception:
            # A failed grade counts as 0.0 (not relevant): the turn goes on towards the web. Passages
            # whose extract it was to copy are used as they are.
            log.exception("grading failed; treating %d chunks as irrelevant", len(passages))
            scores = [0.0] * len(passages)
            self.sent_to_refine -= {g.chunk.id for g, want in zip(passages, extract, strict=True) if want}
        if len(scores) != len(passages):
            log.error("grader returned %d scores for %d chunks", len(scores), len(passages))
            scores = [*scores, *[0.0] * len(passages)][: len(passages)]
        return [min(1.0, max(0.0, float(x))) for x in scores]

    def start_web(self, s: TurnState) -> None:
        self.web_task = asyncio.create_task(self.find_on_web(s))
        self.web_reading = s.standalone

    async def find_on_web(self, s: TurnState) -> tuple[str, WebOutcome]:
        e = self.e
        # A question read after the previous one only because nothing was found for it alone is
        # searched for as read; a follow-up is read with the history by the rewriter itself.
        read_anew = s.tried_previous and s.standalone != s.question
        query = await e.rewriter.rewrite_for_web(
            *((s.standalone, ()) if read_anew else (s.question, s.history))
        )
        if not e.web_breaker.allow():
            return query, WebOutcome(
                status=WebStatus.FAILED, message="Web search is temporarily unavailable."
            )
        outcome = await e.web.search(query, e.config.web_results)
        if outcome.status is WebStatus.FAILED:
            e.web_breaker.failure()
        elif outcome.status is WebStatus.OK:
            e.web_breaker.success()
        return query, outcome

    def result(self, s: TurnState) -> CragResult:
        assert s.answer is not None  # generate ran
        kept = {g.chunk.id for g in s.kept}
        return CragResult(
            question=s.question,
            language=s.language,
            queries=list(s.queries),
            web_query=s.web_query,
            branch=s.branch,
            missing_parts=list(s.missing),
            graded=[g.model_copy(update={"kept": g.chunk.id in kept}) for g in s.graded],
            web=s.web,
            answer=s.answer.text,
            refused=s.answer.refused,
            citations=s.answer.citations,
            followups=s.answer.followups,
            notices=list(self.turn.notices),
            timings_ms=self.timings,
            llm_calls=self.turn.llm_calls,
            llm_tokens=self.turn.tokens,
            providers=self.e.providers,
            thresholds=self.e.config.thresholds,
        )


def step_attributes(name: str, s: TurnState) -> dict[str, spans.AttributeValue]:
    """What a step's span says it did: counts, grades and statuses, never text."""
    if name in ("retrieve", "research"):
        return {"crag.found": len(s.searched), "crag.queries": len(s.queries), "crag.rounds": s.rounds}
    if name == "grade":
        return {
            "crag.best_grade": max((g.score for g in s.graded), default=0.0),
            "crag.graded_chunks": len(s.graded),
            "crag.missing_parts": len(s.missing),
        }
    if name == "web":
        return {
            "crag.web.status": s.web.status.value,
            "crag.web.results": len(s.web.results),
        }
    if name == "refine":
        return {"crag.knowledge": len(s.knowledge), "crag.web_knowledge": len(s.web_knowledge)}
    if name == "generate" and s.answer is not None:
        return {"crag.refused": s.answer.refused, "crag.citations": len(s.answer.citations)}
    return {}


async def _extracted(
    passages: Sequence[GradedChunk], wanted: Sequence[bool], extracts: Sequence[Awaitable[str | None]]
) -> tuple[list[GradedChunk], list[WebResult]]:
    """What a refiner returns for the passages whose extract their grading call copied: each with
    its extract, as it is where there is none to use, and left out where nothing in it helps."""
    texts = await asyncio.gather(*extracts)
    out: list[GradedChunk] = []
    for g, want, text in zip(passages, wanted, texts, strict=True):
        if not want or text == "":
            continue
        out.append(
            g if text is None else g.model_copy(update={"chunk": g.chunk.model_copy(update={"text": text})})
        )
    return out, []


async def _ignore(stage: Stage) -> None:
    return None


__all__ = ["CragEngine", "EngineConfig", "TurnState"]
