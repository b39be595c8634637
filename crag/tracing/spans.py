"""Spans of a turn through OpenTelemetry's API: off (nothing created, nothing recorded) until the
app's wiring point installs a tracer provider (crag/tracing/export.py).

The engine names its spans and sets counts and grades on them; which exporter gets them, if any,
is decided once per process. Off, `span` hands back OpenTelemetry's non-recording span without
touching the context, so a turn pays one `None` check per stage.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from opentelemetry.trace import INVALID_SPAN, Span, Tracer, TracerProvider
from opentelemetry.util.types import AttributeValue

Attributes = Mapping[str, AttributeValue]

__all__ = ["AttributeValue", "Attributes", "enabled", "install", "span"]

_tracer: Tracer | None = None


def install(provider: TracerProvider | None) -> None:
    """Send spans to `provider` from now on (None: tracing off). Not OpenTelemetry's global provider:
    that one can be set once per process, and tests start several apps in one."""
    global _tracer
    _tracer = provider.get_tracer("crag") if provider is not None else None


def enabled() -> bool:
    return _tracer is not None


@contextmanager
def span(name: str, attributes: Attributes | None = None) -> Iterator[Span]:
    """A span around the block, child of the current one; an exception is recorded on it and
    re-raised. Off: the non-recording span (its setters do nothing)."""
    if _tracer is None:
        yield INVALID_SPAN
        return
    with _tracer.start_as_current_span(name, attributes=attributes) as current:
        yield current
