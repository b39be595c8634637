"""One span around a command's run, so that a run nobody watches (crag-ingest in Azure's indexing
job) reports its outcome where the bot's turns go: Application Insights or an OTLP collector, when
the settings name one (crag/tracing/export.py), nowhere otherwise. The span carries the exit
status; a non-zero status or an exception marks it failed (the exception is recorded on it too)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from opentelemetry.trace import Status, StatusCode

from crag.config.tracing import TracingSettings
from crag.tracing import spans
from crag.tracing.export import configure_tracing


async def traced_run(
    name: str, attributes: spans.Attributes, settings: TracingSettings, run: Callable[[], Awaitable[int]]
) -> int:
    export = configure_tracing(settings)
    try:
        with spans.span(name, attributes) as current:
            code = await run()
            current.set_attribute("crag.exit_code", code)
            if code != 0:
                current.set_status(Status(StatusCode.ERROR, f"exit status {code}"))
            return code
    finally:
        if export is not None:
            await export.close()  # exports what is queued before the process ends
