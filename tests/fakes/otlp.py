"""Fake telemetry backends on 127.0.0.1 for the real exporters: an OTLP/HTTP collector that decodes
each protobuf ExportTraceServiceRequest, and Application Insights' ingestion endpoint (/v2.1/track)."""

from __future__ import annotations

import asyncio
import gzip
import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from crag.eval.loopback import LoopbackServer


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    status_code: int


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


class _Server(LoopbackServer):
    def __init__(self) -> None:
        super().__init__()
        self.requests: list[dict[str, str]] = []  # method, path, content type of every call

    async def body(self, request: web.Request) -> bytes:
        self.requests.append({"method": request.method, "path": request.path, "type": request.content_type})
        data = await request.read()
        return gzip.decompress(data) if request.headers.get("Content-Encoding") == "gzip" else data


class FakeCollector(_Server):
    """OTLP/HTTP traces at /v1/traces, decoded with opentelemetry-proto."""

    def __init__(self) -> None:
        super().__init__()
        self.spans: list[ReceivedSpan] = []

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/traces", self._traces)

    async def _traces(self, request: web.Request) -> web.Response:
        message = ExportTraceServiceRequest()
        message.ParseFromString(await self.body(request))
        for resource_spans in message.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    self.spans.append(
                        ReceivedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            attributes=_attributes(span.attributes),
                            resource=resource,
                            status_code=span.status.code,
                        )
                    )
        return web.Response(
            body=ExportTraceServiceResponse().SerializeToString(), content_type="application/x-protobuf"
        )

    async def wait_for(self, name: str, count: int = 1, timeout: float = 15.0) -> list[ReceivedSpan]:
        deadline = asyncio.get_running_loop().time() + timeout
        while len(found := [s for s in self.spans if s.name == name]) < count:
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.05)
        return found


class FakeAppInsights(_Server):
    """Application Insights' ingestion: JSON telemetry items POSTed to /v2.1/track."""

    def __init__(self) -> None:
        super().__init__()
        self.items: list[dict[str, Any]] = []

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v2.1/track", self._track)
        # The portal's connection strings end the IngestionEndpoint with "/", which the exporter
        # keeps: the service takes "//v2.1/track" as well.
        app.router.add_post("//v2.1/track", self._track)

    async def _track(self, request: web.Request) -> web.Response:
        raw = await self.body(request)
        items = (
            json.loads(raw)
            if raw.lstrip().startswith(b"[")
            else [json.loads(line) for line in raw.splitlines() if line.strip()]
        )
        self.items.extend(items)
        return web.json_response({"itemsReceived": len(items), "itemsAccepted": len(items), "errors": []})
