"""Pydantic models at the engine's boundaries: what flows from the engine to cards, storage, logs and eval."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Branch(StrEnum):
    CORRECT = "correct"  # internal documents only
    AMBIGUOUS = "ambiguous"  # documents plus web
    INCORRECT = "incorrect"  # web only


class Stage(StrEnum):
    """What a turn is doing, as clients show it while they wait (catalog: stage.<value>)."""

    SEARCHING = "searching"
    GRADING = "grading"
    RESEARCHING = "researching"  # searching again for what the first search did not cover
    WEB = "web"
    WRITING = "writing"


class Notice(StrEnum):
    """Something the reader should know about how the answer was made, mostly that it went less well
    than configured; the card says so (hosting/ui_texts/catalog.toml: notice.<value>)."""

    LLM_FALLBACK = "llm_fallback"  # the language model failed: a local provider stood in
    SEARCH_FAILED = "search_failed"  # the document index could not be searched
    # Nothing in the question pointed back, yet it was answered as read after the previous one: the
    # reader sees why an answer about the earlier topic came (crag/engine.py lean_on_previous).
    READ_WITH_PREVIOUS = "read_with_previous"


class Chunk(BaseModel):
    """One retrievable piece of a document, with enough provenance to cite it."""

    id: str
    file: str  # path relative to the documents folder, forward slashes
    title: str
    headers: list[str] = Field(default_factory=list)  # H1..H3 path leading to this chunk
    text: str
    url: str = ""
    ordinal: int = 0  # position of the chunk inside its file
    # The sentence before the chunk's first one when a long paragraph was cut between them: what that
    # first sentence goes on about (「日当は定額手当です。」 before 「日帰り出張は¥2,500…」). Read
    # with the chunk, never quoted or indexed as its text. "" when the chunk starts a paragraph.
    lead: str = ""
    # Principals that may read the chunk's document (crag/core/access.py); None: permissions unknown.
    allowed: tuple[str, ...] | None = None

    @property
    def header_path(self) -> str:
        return " > ".join(self.headers)

    @property
    def framed_text(self) -> str:
        """The heading path, then the body: what the index searches and graders and models read."""
        return "\n".join([*dict.fromkeys(self.headers), self.text])


class GradedChunk(BaseModel):
    chunk: Chunk
    retrieval_score: float = 0.0
    score: float = 0.0  # relevance to the question, 0.0-1.0 on the rubric
    kept: bool = False
    # A question of several parts: the relevance to each part, in order (score is the best of them).
    part_scores: tuple[float, ...] = ()
    # How much the passage is about the question's topic, whether or not it answers it (a grader that
    # tells the two apart sets it; 0.0 otherwise): on topic and answering nothing is "not stated".
    topic: float = 0.0


class WebResult(BaseModel):
    title: str
    url: str
    snippet: str
    kind: Literal["answer_box", "organic", "related_question"] = "organic"


class WebStatus(StrEnum):
    NOT_NEEDED = "not_needed"  # branch was correct: the web was not consulted
    OFF = "off"  # no web search provider configured
    OK = "ok"
    FAILED = "failed"


class WebOutcome(BaseModel):
    status: WebStatus
    results: list[WebResult] = Field(default_factory=list)
    message: str = ""  # safe to show: never contains keys or raw exceptions


# A citation marker in an answer's text, "[n]", with n in group 1.
CITATION_MARKER = re.compile(r"\[(\d{1,2})\]")


class Citation(BaseModel):
    number: int  # the [n] marker used in the answer text
    kind: Literal["document", "web"]
    title: str
    url: str = ""
    file: str = ""  # documents only
    excerpt: str = ""


class GeneratedAnswer(BaseModel):
    text: str
    citations: list[Citation] = Field(default_factory=list)
    refused: bool = False  # the fixed "cannot answer" text was returned
    absent: bool = False  # opens with texts.ABSENT: the passages lack a fact of the asked kind
    followups: list[str] = Field(default_factory=list)


class Thresholds(BaseModel):
    """correct: the best passage is graded >= upper (and every part of the question has such a
    passage); ambiguous: some passage >= lower; incorrect: none. Settings: CRAG_UPPER_THRESHOLD,
    CRAG_LOWER_THRESHOLD."""

    model_config = ConfigDict(frozen=True)

    upper: float = Field(default=0.8, ge=0.0, le=1.0)
    lower: float = Field(default=0.4, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _ordered(self) -> Thresholds:
        if self.lower > self.upper:
            raise ValueError(f"the lower threshold ({self.lower}) must not exceed the upper ({self.upper})")
        return self

    def branch(self, scores: Sequence[float], missing_parts: Sequence[str] = ()) -> Branch:
        best = max(scores, default=0.0)
        if best >= self.upper and not missing_parts:
            return Branch.CORRECT
        return Branch.AMBIGUOUS if best >= self.lower else Branch.INCORRECT

    def decide(
        self, graded: Sequence[GradedChunk], missing_parts: Sequence[str] = ()
    ) -> tuple[Branch, list[GradedChunk]]:
        """The branch and the passages an answer is written from (best first, marked kept): on the
        correct branch those >= upper, otherwise those >= lower."""
        branch = self.branch([g.score for g in graded], missing_parts)
        floor = self.upper if branch is Branch.CORRECT else self.lower
        ranked = sorted(graded, key=lambda g: -g.score)
        return branch, [g.model_copy(update={"kept": True}) for g in ranked if g.score >= floor]

    def needs_web(self, branch: Branch) -> bool:
        """Whether the answer on this branch is written with web results (every branch but correct)."""
        return branch is not Branch.CORRECT

    def covers(self, best: float) -> bool:
        """Does a passage graded `best` answer this (part of the) question?"""
        return best >= self.upper

    def match(self, score: float) -> Literal["strong", "partial", "weak"]:
        """How well a passage graded `score` matches, in the routing's own terms."""
        if score >= self.upper:
            return "strong"
        return "partial" if score >= self.lower else "weak"


# The grading rubric: a grader's 0.8 means "answers it" and 0.4 "does not" (the local grader
# calibrates its logits onto these anchors). The routing thresholds default to the same values and
# may be moved; the rubric does not move with them.
RUBRIC = Thresholds()


class CragResult(BaseModel):
    """Everything one engine turn produced; the single object cards, storage, logs and eval read."""

    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    question: str
    language: Literal["ja", "en"]
    queries: list[str] = Field(default_factory=list)  # every document search, in order
    web_query: str = ""
    branch: Branch
    # Parts of a multi-part question that no passage answers (they keep it off the correct branch).
    missing_parts: list[str] = Field(default_factory=list)
    graded: list[GradedChunk] = Field(default_factory=list)
    web: WebOutcome = Field(default_factory=lambda: WebOutcome(status=WebStatus.NOT_NEEDED))
    answer: str
    refused: bool = False
    citations: list[Citation] = Field(default_factory=list)
    followups: list[str] = Field(default_factory=list)
    notices: list[str] = Field(default_factory=list)
    timings_ms: dict[str, float] = Field(default_factory=dict)
    cache_hit: bool = False  # served from the answer cache (timings are then not this turn's work)
    llm_calls: int = 0
    llm_tokens: int = 0
    providers: dict[str, str] = Field(default_factory=dict)
    # The thresholds the turn was routed with (the card labels each passage's match with them).
    thresholds: Thresholds = Field(default_factory=Thresholds)

    @property
    def kept(self) -> list[GradedChunk]:
        return [g for g in self.graded if g.kept]

    @property
    def cited_files(self) -> list[str]:
        seen: list[str] = []
        for c in self.citations:
            if c.kind == "document" and c.file not in seen:
                seen.append(c.file)
        return seen

    @property
    def web_urls(self) -> list[str]:
        return [c.url for c in self.citations if c.kind == "web" and c.url]


class Turn(BaseModel):
    """One earlier exchange of the conversation, for follow-up aware rewriting."""

    question: str
    answer: str = ""
