"""Where turn traces go, decided once per process at the app's start (app.py; each worker is a
process of its own): an OTLP/HTTP collector, Application Insights, both, or nowhere.

Off (neither set, or OTEL_SDK_DISABLED) the SDK is not even imported and crag/tracing/spans.py's spans
stay no-ops. On, spans are batched and exported from the SDK's own thread: a slow or dead collector
costs a warning in the log, never a turn's time.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from crag.config.tracing import TracingSettings
from crag.tracing import spans

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

log = logging.getLogger(__name__)


class TracingExport:
    """The installed provider; `close` exports what is still queued and turns tracing off."""

    def __init__(self, provider: TracerProvider, destinations: list[str]) -> None:
        self.provider = provider
        self.destinations = destinations

    async def close(self) -> None:
        spans.install(None)
        # Flushing waits for the exporters (up to their timeout when a collector is down): off the loop.
        await asyncio.to_thread(self.provider.shutdown)


def configure_tracing(settings: TracingSettings) -> TracingExport | None:
    """Install the exporters the settings name; None, and nothing installed, when there are none."""
    if not settings.exporting:
        return None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # OTEL_RESOURCE_ATTRIBUTES are merged in by Resource.create.
    resource = Resource.create(
        {
            "service.name": settings.service_name,
            "service.instance.id": f"{socket.gethostname()}-{os.getpid()}",
        }
    )
    provider = TracerProvider(resource=resource)
    exporters: list[tuple[str, SpanExporter]] = []
    if settings.traces_endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        endpoint = settings.traces_endpoint
        exporters.append((f"OTLP {_where(endpoint)}", OTLPSpanExporter(endpoint)))
    connection = settings.appinsights_connection_string.get_secret_value()
    if connection:
        azure = _azure_monitor(connection, provider)
        if azure is not None:
            exporters.append(("Application Insights", azure))
    if not exporters:
        return None
    for _, exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    spans.install(provider)
    names = [name for name, _ in exporters]
    question = "with" if settings.question_text else "without"
    log.info("tracing turns to %s (%s question text)", " and ".join(names), question)
    return TracingExport(provider, names)


def _azure_monitor(connection: str, provider: TracerProvider) -> SpanExporter | None:
    from azure.monitor.opentelemetry.exporter import AzureMonitorTraceExporter

    try:
        # Given the provider: it reads the service name from its resource (not the global provider's).
        exporter: SpanExporter = AzureMonitorTraceExporter(
            connection_string=connection, tracer_provider=provider
        )
    except ValueError as exc:
        # The SDK's message names what is wrong with the string, not the string (the key is a secret).
        log.warning("APPLICATIONINSIGHTS_CONNECTION_STRING is not usable (%s); not exporting there", exc)
        return None
    return exporter


def _where(url: str) -> str:
    """scheme://host:port of an endpoint, for the log: a URL may carry credentials."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}"
