"""The small interfaces the engine talks to; it never knows which LLM, index or web search is behind them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from crag.core.access import Reader
from crag.core.models import Chunk, GeneratedAnswer, GradedChunk, Stage, Turn, WebOutcome, WebResult

# Receives the partial answer text while it is being generated (for streaming UIs).
TextSink = Callable[[str], Awaitable[None]]
# Receives the name of the stage the engine is entering: searching, grading, web, writing.
StageSink = Callable[[Stage], Awaitable[None]]
# Releases a provider's connections at shutdown.
Closer = Callable[[], Awaitable[None]]


class TurnStopped(BaseException):
    """A sink raises it when the client stopped the turn (Teams' Stop button): the engine ends the turn
    at once, marks its span as stopped and raises it on to the caller.

    A BaseException, as CancelledError is: no stage's fallback (`except Exception`) may mistake a stop
    for a failure and go on writing an answer nobody will read."""


class QueryRewriter(Protocol):
    name: str

    async def rewrite(self, question: str, history: Sequence[Turn]) -> str:
        """Search keywords for the document index."""
        ...

    async def rewrite_for_web(self, question: str, history: Sequence[Turn]) -> str:
        """A query for a web search engine."""
        ...

    def standalone(self, question: str, history: Sequence[Turn]) -> str:
        """The question as it reads on its own: with the earlier question it leans on ("what about
        the plants?"), or unchanged when it stands alone. Grading and the answer read this."""
        ...

    def may_lean(self, question: str, history: Sequence[Turn]) -> bool:
        """Whether a question that does not point back is too short to be sure it stands alone
        (「返事くるまでどれくらいかかる？」): the engine then tries it read after the previous one too."""
        ...

    def with_previous(self, question: str, history: Sequence[Turn]) -> str:
        """The question read after the previous turn's, though nothing in it points back: the
        engine's second reading when, taken alone, the documents have nothing (or, for a question
        too short to tell, only a partial answer) for it."""
        ...

    async def rewrite_missing(
        self, question: str, history: Sequence[Turn], missing: Sequence[str], used: Sequence[str]
    ) -> list[str]:
        """New search keywords for the parts of the question the documents found so far do not
        answer (`missing`; the whole question when one part), other than the `used` queries.
        Empty when there is nothing new to search for."""
        ...


class Retriever(Protocol):
    name: str

    async def search(
        self, query: str, top_k: int, question: str | None = None, reader: Reader | None = None
    ) -> list[GradedChunk]:
        """The top_k chunks for the query, best first, with retrieval_score set and score unset.
        `question` is the user's own words, for a retriever that embeds them (the grader embeds the
        same text, so a local index computes one question vector per turn). With a `reader` (access
        trimming on, crag/core/access.py), only chunks that reader may read, filtered in the search
        itself, before its top_k: never top_k fetched and the unreadable dropped."""
        ...


class Grader(Protocol):
    @property
    def name(self) -> str:
        """The provider's name; may change as it gets ready (the local grader once vectors exist)."""
        ...

    async def grade(self, question: str, chunks: Sequence[Chunk]) -> list[float]:
        """Relevance of each chunk to the question on the 0.0-1.0 rubric, in input order."""
        ...


@runtime_checkable
class TopicalGrader(Grader, Protocol):
    """A grader that tells a passage answering the question from one only about its topic: grade()
    is the first, topic() the second (0.0-1.0, the rubric's scale)."""

    async def topic(self, question: str, chunks: Sequence[Chunk]) -> list[float]: ...


@runtime_checkable
class ExtractingGrader(Grader, Protocol):
    """A grader whose grading call can also copy out the sentences of a passage that bear on the
    question (CRAG's knowledge refinement), so refined passages cost no model call of their own."""

    async def grade_extracting(
        self, question: str, chunks: Sequence[Chunk], extract: Sequence[bool]
    ) -> tuple[list[float], list[Awaitable[str | None]]]:
        """The scores, as grade() gives them, as soon as they are known; and for each chunk its
        extract, when the call ends: the sentences that help ("" when none does), or None when there
        is none to use (not asked for, the passage too short to need one, or the call failed):
        the passage is then used as it is."""
        ...


class WebSearch(Protocol):
    name: str

    async def search(self, query: str, num: int) -> WebOutcome:
        """Never raises: failures come back as WebOutcome(status=FAILED, message=...)."""
        ...


class KnowledgeRefiner(Protocol):
    name: str

    async def refine(
        self, question: str, chunks: Sequence[GradedChunk], web: Sequence[WebResult]
    ) -> tuple[list[GradedChunk], list[WebResult]]:
        """Only what bears on the question (dropping whatever holds nothing of use)."""
        ...


@dataclass(frozen=True)
class AnswerRequest:
    """What an answer is written from: the question (as it reads on its own), its language, and the
    knowledge kept for it. `latest`: the user's own words when `question` is them read with an
    earlier turn (a follow-up, 「部長だったら？」 after 「ホテル代の上限は？」): what the answer is
    about, the earlier turn its context. `lacking`: the documents are on the question's topic but no
    passage answers it; the answer opens by saying so (core/texts.py ABSENT), then gives the nearest
    passage or the web's."""

    question: str
    language: Literal["ja", "en"]
    chunks: Sequence[GradedChunk]
    web: Sequence[WebResult]
    latest: str | None = None
    lacking: bool = False


class AnswerGenerator(Protocol):
    name: str

    async def generate(self, ask: AnswerRequest, on_text: TextSink | None = None) -> GeneratedAnswer:
        """An answer from the given knowledge only, with numbered citations, or the refusal text.
        A generator that streams calls on_text with the answer so far as it grows."""
        ...


class Embedder(Protocol):
    """Text embeddings for vector search: the configured embedding deployment or model, or a local
    multilingual model. Queries and passages are embedded apart because some models (e5) are trained
    with a different prefix for each role; models without roles embed both the same way."""

    name: str

    async def embed_query(self, text: str) -> list[float]:
        """The vector of a search question. Raises on failure (callers decide how to degrade)."""
        ...

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per passage, in input order. Raises on failure."""
        ...


@dataclass(frozen=True)
class SearchBuild:
    """What a search provider's `build` returns (crag/retrieval/search/__init__.py)."""

    retriever: Retriever
    closers: tuple[Closer, ...] = ()
