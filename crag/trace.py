"""Per-turn accounting shared by the providers: LLM calls, tokens and degradation notices.

Providers run deep inside the engine (and inside concurrent tasks); a context variable lets each of
them record what happened without threading a parameter through every protocol.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from crag.models import Notice


@dataclass
class TurnTrace:
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    notices: list[str] = field(default_factory=list)

    def notice(self, code: Notice) -> None:
        if code not in self.notices:
            self.notices.append(code)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


_current: ContextVar[TurnTrace | None] = ContextVar("crag_turn_trace", default=None)


def current() -> TurnTrace:
    """The running turn's trace; outside a turn, a throwaway one."""
    return _current.get() or TurnTrace()


@contextmanager
def turn_trace() -> Iterator[TurnTrace]:
    trace = TurnTrace()
    token = _current.set(trace)
    try:
        yield trace
    finally:
        _current.reset(token)
