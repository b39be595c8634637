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
from collections.abc import Sequence

from crag import trace
from crag.llm import prompts
from crag.llm.client import LlmClient, LlmUnavailable
from crag.models import Chunk, Notice
from crag.protocols import Grader

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
        self, llm: LlmClient, fallback: Grader, concurrency: int = 5, batch: bool = False, batch_size: int = 5
    ) -> None:
        self._llm = llm
        self._fallback = fallback
        self._concurrency = concurrency
        self._batch = batch
        self._batch_size = batch_size
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
            log.warning("grading fell back to the local grader: %s", exc)
            trace.current().notice(Notice.LLM_FALLBACK)
            return await self._fallback.grade(question, chunks)

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
