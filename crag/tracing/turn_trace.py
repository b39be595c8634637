"""Per-turn accounting shared by the providers: LLM calls, tokens and degradation notices, and the
turn's OpenTelemetry span with a child span per step (crag/tracing/spans.py; no-ops while tracing is off).

Providers run deep inside the engine (and inside concurrent tasks); a context variable lets each of
them record what happened without threading a parameter through every protocol.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from opentelemetry.trace import INVALID_SPAN, Span

from crag.core.models import CragResult, Notice
from crag.tracing import spans


@dataclass
class TurnTrace:
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    notices: list[str] = field(default_factory=list)
    span: Span = INVALID_SPAN  # the turn's span (non-recording while tracing is off)

    def notice(self, code: Notice) -> None:
        if code not in self.notices:
            self.notices.append(code)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @contextmanager
    def stage(self, name: str) -> Iterator[Span]:
        """A step's span (rewrite, retrieve, grade, research, web, refine, generate), child of the
        turn's."""
        with spans.span(f"crag.{name}") as span:
            yield span

    def stopped(self) -> None:
        """The client stopped the turn (crag.core.protocols.TurnStopped): what it cost until then."""
        if self.span.is_recording():
            self.span.set_attributes({"crag.stopped": True, **self._spent()})

    def record(self, result: CragResult, cache_hit: bool) -> None:
        """What the turn did, on its span: counts, grades and the branch, never the texts. The LLM
        figures are this turn's own (a cache hit made no call, whatever the cached answer cost)."""
        if not self.span.is_recording():
            return
        grades = [g.score for g in result.graded]
        self.span.set_attributes(
            {
                "crag.cache_hit": cache_hit,
                "crag.branch": result.branch.value,
                "crag.best_grade": max(grades, default=0.0),
                "crag.graded_chunks": len(grades),
                "crag.kept_chunks": len(result.kept),
                "crag.queries": len(result.queries),
                "crag.language": result.language,
                "crag.refused": result.refused,
                "crag.web.status": result.web.status.value,
                **self._spent(),
            }
        )

    def _spent(self) -> dict[str, spans.AttributeValue]:
        """What the turn cost so far: its LLM calls and tokens, and the degradations it met."""
        return {
            "crag.llm.calls": self.llm_calls,
            "crag.llm.prompt_tokens": self.prompt_tokens,
            "crag.llm.completion_tokens": self.completion_tokens,
            "crag.llm.tokens": self.tokens,
            "crag.notices": list(self.notices),
        }


_current: ContextVar[TurnTrace | None] = ContextVar("crag_turn_trace", default=None)


def current() -> TurnTrace:
    """The running turn's trace; outside a turn, a throwaway one."""
    return _current.get() or TurnTrace()


@contextmanager
def turn_trace(attributes: spans.Attributes | None = None) -> Iterator[TurnTrace]:
    """The turn's accounting, and its span ("crag.turn") carrying `attributes` from the start."""
    with spans.span("crag.turn", attributes) as span:
        trace = TurnTrace(span=span)
        token = _current.set(trace)
        try:
            yield trace
        finally:
            _current.reset(token)
