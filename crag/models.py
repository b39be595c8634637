"""Pydantic models at the engine's boundaries: what flows from the engine to cards, storage, logs and eval."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field


class Branch(StrEnum):
    CORRECT = "correct"  # internal documents only
    AMBIGUOUS = "ambiguous"  # documents plus web
    INCORRECT = "incorrect"  # web only


class Stage(StrEnum):
    """What a turn is doing, as clients show it while they wait (texts/catalog.toml: stage.<value>)."""

    SEARCHING = "searching"
    GRADING = "grading"
    RESEARCHING = "researching"  # searching again for what the first search did not cover
    WEB = "web"
    WRITING = "writing"


class Notice(StrEnum):
    """Something the reader should know about how the answer was made, mostly that it went less well
    than configured; the card says so (texts/catalog.toml: notice.<value>)."""

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
    # Principals that may read the chunk's document (crag/access.py); None: permissions unknown.
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
    followups: list[str] = Field(default_factory=list)


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
