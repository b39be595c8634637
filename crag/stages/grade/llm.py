"""Relevance grading with the language model: one call per chunk (bounded concurrency) or batches.

Replies are parsed leniently ("Relevance Score: 0.85", "0.85", JSON, "85%", "8/10"); anything else
counts as 0.0 with a log line. When the model is unreachable the whole batch is graded by the local
grader and the turn says so.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Sequence

from crag.core.models import Chunk, Notice
from crag.core.protocols import Grader
from crag.providers.llm import prompts
from crag.providers.llm.client import LlmClient, LlmUnavailable
from crag.stages.refine.llm import mostly_copied
from crag.tracing import turn_trace

log = logging.getLogger(__name__)

_LABELLED = re.compile(r"relevance\s*score\s*[:：=]?\s*(\d+(?:\.\d+)?)\s*(%|/\s*10\b)?", re.I)
_BARE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(%|/\s*10)?\s*\.?\s*$")
_PASSAGE_CHARS = 3000


def parse_score(reply: str) -> float | None:
    """The 0.0-1.0 score in a grading reply, or None when there is none."""
    text = reply.strip()
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        for key in ("score", "relevance_score", "relevance", "Relevance Score"):
            if isinstance(data.get(key), int | float):
                return _clip(float(data[key]), None)
    if isinstance(data, int | float) and not isinstance(data, bool):
        return _clip(float(data), None)
    match = _LABELLED.search(text) or _BARE.match(text)
    if match is None:
        return None
    return _clip(float(match.group(1)), match.group(2))


def parse_scores(reply: str, count: int) -> list[float] | None:
    """A batch reply: a JSON list of `count` scores (possibly inside a code fence)."""
    match = re.search(r"\[[^\[\]]*\]", reply)
    if match is None:
        return None
    try:
        values = json.loads(match.group(0))
    except ValueError:
        return None
    if not isinstance(values, list) or len(values) != count:
        return None
    scores = []
    for v in values:
        score = parse_score(str(v))
        scores.append(0.0 if score is None else score)
    return scores


def _clip(value: float, unit: str | None) -> float | None:
    if unit and unit.startswith("%"):
        value /= 100
    elif unit:
        value /= 10
    elif value > 1.0 and value <= 10.0:
        value /= 10  # "8" on a 0-10 reading of the scale
    if value < 0 or value > 1.0:
        return None
    return value


def passage(chunk: Chunk) -> str:
    where = " > ".join(chunk.headers) or chunk.title
    return f"[{chunk.file} | {where}]\n{chunk.text[:_PASSAGE_CHARS]}"


class LlmGrader:
    name = "llm-grade"

    def __init__(
        self,
        llm: LlmClient,
        fallback: Grader,
        concurrency: int = 5,
        batch: bool = False,
        batch_size: int = 5,
        extract_min_chars: int = 600,
    ) -> None:
        self._llm = llm
        self._fallback = fallback
        self._concurrency = concurrency
        self._batch = batch
        self._batch_size = batch_size
        # Shorter passages are used whole: an extract would save little and cost output tokens.
        self._extract_min_chars = extract_min_chars
        if batch:
            self.name = "llm-grade-batch"

    async def grade(self, question: str, chunks: Sequence[Chunk]) -> list[float]:
        # The bound is per turn (the client bounds the whole process): one turn's grading must not
        # queue behind another conversation's.
        bound = asyncio.Semaphore(self._concurrency)
        try:
            if self._batch:
                groups = [chunks[i : i + self._batch_size] for i in range(0, len(chunks), self._batch_size)]
                results = await asyncio.gather(*(self._grade_batch(question, g, bound) for g in groups))
                return [s for group in results for s in group]
            return list(await asyncio.gather(*(self._grade_one(question, c, bound) for c in chunks)))
        except LlmUnavailable as exc:
            return await self._fall_back(question, chunks, exc)

    async def grade_extracting(
        self, question: str, chunks: Sequence[Chunk], extract: Sequence[bool]
    ) -> tuple[list[float], list[Awaitable[str | None]]]:
        """One call per chunk, as grade() makes them; a long chunk asked for its extract is graded
        by a streamed call whose first line is the score and the rest the extract. The scores are
        returned once every first line is in: routing does not wait for the extracts."""
        bound = asyncio.Semaphore(self._concurrency)
        wanted = [
            bool(want) and len(c.text) >= self._extract_min_chars
            for c, want in zip(chunks, extract, strict=True)
        ]
        calls = [
            self._grade_streamed(question, c, bound) if want else self._plain(question, c, bound)
            for c, want in zip(chunks, wanted, strict=True)
        ]
        try:
            graded = await asyncio.gather(*calls)
        except LlmUnavailable as exc:
            return await self._fall_back(question, chunks, exc), [_none() for _ in chunks]
        return [score for score, _ in graded], [rest for _, rest in graded]

    async def _fall_back(self, question: str, chunks: Sequence[Chunk], exc: LlmUnavailable) -> list[float]:
        """The whole round graded locally when the model cannot be reached, and the turn says so."""
        log.warning("grading fell back to the local grader: %s", exc)
        turn_trace.current().notice(Notice.LLM_FALLBACK)
        return await self._fallback.grade(question, chunks)

    async def _plain(
        self, question: str, chunk: Chunk, bound: asyncio.Semaphore
    ) -> tuple[float, Awaitable[str | None]]:
        return await self._grade_one(question, chunk, bound), _none()

    async def _grade_streamed(
        self, question: str, chunk: Chunk, bound: asyncio.Semaphore
    ) -> tuple[float, Awaitable[str | None]]:
        loop = asyncio.get_running_loop()
        first_line: asyncio.Future[str] = loop.create_future()

        async def on_text(so_far: str) -> None:
            if not first_line.done() and "\n" in so_far.lstrip():
                first_line.set_result(so_far.lstrip().split("\n", 1)[0])

        async with bound:
            framed = prompts.Fence().wrap(passage(chunk))
            call = asyncio.create_task(
                self._llm.chat_stream(
                    prompts.GRADE_EXTRACT,
                    f"Question: {question}\n\nPassage:\n{framed}",
                    on_text,
                    max_tokens=20 + 600,
                )
            )
            # A failure is read by _extract_of, or by no one when grading falls back: never left unread.
            call.add_done_callback(_read_failure)
            await asyncio.wait({first_line, call}, return_when=asyncio.FIRST_COMPLETED)
        # Without a first line the reply ended on it (a score, no extract), or the call failed:
        # then result() raises LlmUnavailable and the whole grading falls back.
        line = first_line.result() if first_line.done() else call.result()
        score = parse_score(line)
        if score is None:
            log.warning("unparseable grade for chunk %s: %r", chunk.id, line[:80])
            score = 0.0
        return score, asyncio.create_task(_extract_of(call, chunk.text))

    async def _grade_one(self, question: str, chunk: Chunk, bound: asyncio.Semaphore) -> float:
        async with bound:
            framed = prompts.Fence().wrap(passage(chunk))
            reply = await self._llm.chat(
                prompts.GRADE, f"Question: {question}\n\nPassage:\n{framed}", max_tokens=20
            )
        score = parse_score(reply)
        if score is None:
            log.warning("unparseable grade for chunk %s: %r", chunk.id, reply[:80])
            return 0.0
        return score

    async def _grade_batch(
        self, question: str, chunks: Sequence[Chunk], bound: asyncio.Semaphore
    ) -> list[float]:
        fence = prompts.Fence()
        numbered = "\n\n".join(f"Passage {i + 1}:\n{fence.wrap(passage(c))}" for i, c in enumerate(chunks))
        async with bound:
            reply = await self._llm.chat(
                prompts.GRADE_BATCH, f"Question: {question}\n\n{numbered}", max_tokens=20 + 8 * len(chunks)
            )
        scores = parse_scores(reply, len(chunks))
        if scores is None:
            log.warning("unparseable batch grade for %d chunks: %r", len(chunks), reply[:80])
            return [0.0] * len(chunks)
        return scores


def _read_failure(call: asyncio.Task[str]) -> None:
    if not call.cancelled():
        call.exception()


def _none() -> asyncio.Future[str | None]:
    """An extract that is not there (already known: nothing to wait for, nothing left unawaited)."""
    done: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
    done.set_result(None)
    return done


async def _extract_of(call: asyncio.Task[str], source: str) -> str | None:
    """The extract after the score line: "" when the model found no sentence that helps, None when
    there is none to use (the call failed, or the text is not copied from the passage: a summary
    or an injection is never shown as the document's words)."""
    try:
        reply = await call
    except LlmUnavailable as exc:
        log.warning("extract lost with its grading call: %s", exc)
        return None
    rest = reply.strip().split("\n", 1)[1].strip() if "\n" in reply.strip() else ""
    if rest.upper().startswith("NONE"):
        return ""
    return rest if rest and mostly_copied(rest, source) else None
