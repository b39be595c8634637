"""OpenTelemetry traces of a turn: one span per turn with a child per CRAG step, counts and grades
as attributes and no user text unless CRAG_TRACE_QUESTIONS allows it; exported by the real OTLP/HTTP
exporter to a fake collector on 127.0.0.1 through the real app, or by the real Azure Monitor
exporter to a fake Application Insights ingestion endpoint."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from botbuilder.core import ConversationState, MemoryStorage, UserState
from botbuilder.core.adapters import TestAdapter
from botbuilder.schema import Activity, ActivityTypes
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import INVALID_SPAN

from bot.bot_runtime import BotRuntime
from bot.crag_bot import CragBot
from crag.config.tracing import TracingSettings
from crag.tracing import spans as tracing
from crag.tracing.export import configure_tracing
from hosting.app_settings import BotSettings
from tests.fakes.bot_connector import FakeConnector, make_activity
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.otlp import FakeAppInsights, FakeCollector
from tests.servers.app_harness import serve_app

DOCS = {
    "leave.md": """# 休暇規程

## 年次有給休暇の繰越し

未使用の年次有給休暇は翌年度に限り最大20日まで繰り越すことができる。繰越分は2年で消滅する。
""",
    "parking.md": """# Parking

## Bicycles

Bicycle parking is in the basement, level B1. Register your bicycle with General Affairs.
""",
}
STEPS = {
    "crag.rewrite",
    "crag.retrieve",
    "crag.grade",
    "crag.refine",
    "crag.generate",
}
LEAVE = "有給休暇の繰越しは最大何日までできますか？"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    yield exporter
    tracing.install(None)
    provider.shutdown()


@asynccontextmanager
async def in_process_bot(tmp_path: Path, **settings: Any) -> AsyncIterator[TestAdapter]:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, "utf-8")
    runtime = BotRuntime(
        BotSettings(
            CRAG_DOCS_DIR=str(docs),
            CRAG_INDEX_DIR=str(tmp_path / "index"),
            CRAG_FEEDBACK_DB=str(tmp_path / "feedback.sqlite3"),
            CRAG_EMBEDDINGS="off",
            STATE_STORAGE="memory",
            OTEL_EXPORTER_OTLP_ENDPOINT="",
            APPLICATIONINSIGHTS_CONNECTION_STRING="",
            **settings,
        )
    )
    await runtime.start()
    await runtime.load_index()
    storage = MemoryStorage()
    bot = CragBot(runtime, ConversationState(storage), UserState(storage))
    try:
        yield TestAdapter(bot.on_turn)
    finally:
        await runtime.close()


async def ask(adapter: TestAdapter, text: str) -> None:
    await adapter.receive_activity(Activity(type=ActivityTypes.message, text=text, locale="ja-JP"))


def turns(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == "crag.turn"]


def children(exporter: InMemorySpanExporter, parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    return [
        s
        for s in exporter.get_finished_spans()
        if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]


def texts_of(spans: list[ReadableSpan]) -> list[str]:
    return [str(v) for s in spans for v in (s.attributes or {}).values()]


async def test_a_turn_is_one_span_with_a_child_per_step(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    # Words-only grades may answer (no vectors here), so the documents answer it without re-search.
    async with in_process_bot(tmp_path, CRAG_WORDS_ONLY_ANSWERS=True) as adapter:
        # The engine's providers emit no spans of their own: only the turn's are recorded.
        await ask(adapter, LEAVE)
        (turn,) = turns(spans)
        steps = children(spans, turn)
        assert {s.name for s in steps} == STEPS  # the documents answer it: no re-search, no web
        assert len(spans.get_finished_spans()) == 1 + len(steps)
        assert turn.parent is None and turn.context is not None
        assert {s.context.trace_id for s in steps if s.context} == {turn.context.trace_id}
        attrs = dict(turn.attributes or {})
        assert attrs["crag.channel"] == "test"  # TestAdapter's channel id, from the bot's activity
        assert attrs["crag.branch"] == "correct" and attrs["crag.cache_hit"] is False
        assert isinstance(attrs["crag.best_grade"], float) and attrs["crag.best_grade"] >= 0.8
        assert isinstance(attrs["crag.kept_chunks"], int) and attrs["crag.kept_chunks"] >= 1
        assert attrs["crag.llm.calls"] == 0 and attrs["crag.llm.tokens"] == 0  # local providers
        assert attrs["crag.question_chars"] == len(LEAVE)
        grade = next(s for s in steps if s.name == "crag.grade")
        assert (grade.attributes or {})["crag.best_grade"] == attrs["crag.best_grade"]
        # No user text anywhere: not the question, not a part of it, not the answer's 20日.
        assert "crag.question" not in attrs
        assert not [t for t in texts_of(spans.get_finished_spans()) if "有給" in t or "20日" in t]

        # The same question again (history cleared, so the cache key is the same) is a cache hit:
        # a turn span without steps.
        await ask(adapter, "reset")
        spans.clear()
        await ask(adapter, LEAVE)
        (again,) = turns(spans)
        assert (again.attributes or {})["crag.cache_hit"] is True
        assert (again.attributes or {})["crag.llm.calls"] == 0
        assert children(spans, again) == []


async def test_re_search_and_web_steps_have_their_spans(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    async with in_process_bot(tmp_path) as adapter:
        # Two parts; the documents hold the first only: the second is searched for again, then the
        # turn goes to the web (off here, said on the span).
        await ask(adapter, "有給休暇の繰越しは何日まで？それと社員食堂の営業時間は？")
        (turn,) = turns(spans)
        attrs = dict(turn.attributes or {})
        steps = children(spans, turn)
        names = [s.name for s in steps]
        assert "crag.research" in names and "crag.web" in names
        assert names.count("crag.grade") == names.count("crag.research") + 1  # one per search
        web = next(s for s in steps if s.name == "crag.web")
        assert (web.attributes or {})["crag.web.status"] == "off"
        assert attrs["crag.branch"] in ("ambiguous", "incorrect") and attrs["crag.web.status"] == "off"
        research = next(s for s in steps if s.name == "crag.research")
        assert (research.attributes or {})["crag.rounds"] == 1


async def test_the_question_text_only_with_the_setting(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    async with in_process_bot(tmp_path, CRAG_TRACE_QUESTIONS=True) as adapter:
        await ask(adapter, LEAVE)
    (turn,) = turns(spans)
    assert (turn.attributes or {})["crag.question"] == LEAVE


def test_tracing_is_off_without_an_exporter(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    assert configure_tracing(TracingSettings(APPLICATIONINSIGHTS_CONNECTION_STRING="")) is None
    assert not tracing.enabled()
    with tracing.span("crag.turn") as span:
        assert span is INVALID_SPAN and not span.is_recording()
    # OpenTelemetry's own switch wins over an endpoint.
    disabled = TracingSettings(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9", OTEL_SDK_DISABLED=True)
    assert configure_tracing(disabled) is None and not tracing.enabled()
    assert TracingSettings(OTEL_EXPORTER_OTLP_ENDPOINT="http://c:4318/").traces_endpoint == (
        "http://c:4318/v1/traces"
    )
    explicit = TracingSettings(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://c:4318/custom")
    assert explicit.traces_endpoint == "http://c:4318/custom"


async def test_a_turn_through_the_app_reaches_the_otlp_collector(
    tmp_path: Path, connector: FakeConnector
) -> None:
    collector, llm = FakeCollector(), FakeOpenAI()
    await collector.start()
    await llm.start()
    question = "What is the monthly remote work allowance?"
    try:
        async with serve_app(
            tmp_path,
            ready=True,
            OTEL_EXPORTER_OTLP_ENDPOINT=collector.url,
            OPENAI_API_KEY="test-key",
            OPENAI_BASE_URL=llm.url + "/v1",
            CRAG_EMBEDDINGS="off",
            CRAG_STREAMING=False,
        ) as (client, _):
            response = await client.post(
                "/api/messages", json=make_activity(connector.url, text=question, channel_id="emulator")
            )
            assert response.status == 201
            assert await connector.wait_for_messages(1)
        # Leaving the app flushed its exporter: the spans are at the collector now.
        (turn,) = await collector.wait_for("crag.turn", timeout=1.0)
    finally:
        await llm.stop()
        await collector.stop()
    assert collector.requests and all(r["type"] == "application/x-protobuf" for r in collector.requests)
    assert turn.parent_id == "" and turn.resource["service.name"] == "crag-bot"
    steps = [s for s in collector.spans if s.parent_id == turn.span_id]
    assert {s.name for s in steps} >= STEPS
    assert all(s.trace_id == turn.trace_id for s in steps)
    attrs = turn.attributes
    assert attrs["crag.channel"] == "emulator" and attrs["crag.cache_hit"] is False
    assert attrs["crag.branch"] in ("correct", "ambiguous", "incorrect")
    # Every model call of the turn counted, with the fake's usage (50 prompt + 10 completion tokens).
    calls = len(llm.chats())
    assert calls > 0 and attrs["crag.llm.calls"] == calls
    assert attrs["crag.llm.tokens"] == 60 * calls and attrs["crag.llm.prompt_tokens"] == 50 * calls
    every_value = [str(v) for s in collector.spans for v in s.attributes.values()]
    assert not [v for v in every_value if "remote work" in v]


async def test_spans_reach_application_insights(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The exporter's own telemetry to Microsoft and its remote configuration stay off in tests.
    for name in (
        "APPLICATIONINSIGHTS_STATSBEAT_DISABLED_ALL",
        "APPLICATIONINSIGHTS_CONTROLPLANE_DISABLED",
        "APPLICATIONINSIGHTS_SDKSTATS_DISABLED",
    ):
        monkeypatch.setenv(name, "true")
    ingestion = FakeAppInsights()
    await ingestion.start()
    key = "00000000-0000-4000-8000-000000000001"
    try:
        settings = TracingSettings(
            APPLICATIONINSIGHTS_CONNECTION_STRING=f"InstrumentationKey={key};IngestionEndpoint={ingestion.url}/",
            OTEL_EXPORTER_OTLP_ENDPOINT="",
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="",
        )
        with caplog.at_level(logging.INFO, logger="crag.tracing.export"):
            export = configure_tracing(settings)
        assert export is not None and export.destinations == ["Application Insights"]
        with tracing.span("crag.turn", {"crag.channel": "msteams"}), tracing.span("crag.grade"):
            pass
        await export.close()
    finally:
        await ingestion.stop()
    assert not tracing.enabled()
    assert ingestion.requests, "nothing reached the ingestion endpoint"
    # Spans arrive as dependency telemetry (internal spans), beside the resource's own metric item.
    dependencies = [i for i in ingestion.items if i["data"]["baseType"] == "RemoteDependencyData"]
    assert {i["data"]["baseData"]["name"] for i in dependencies} == {"crag.turn", "crag.grade"}
    assert {i["iKey"] for i in ingestion.items} == {key}
    turn = next(i for i in dependencies if i["data"]["baseData"]["name"] == "crag.turn")
    assert turn["tags"]["ai.cloud.role"] == "crag-bot"  # the service name, from the provider's resource
    assert turn["data"]["baseData"]["properties"]["crag.channel"] == "msteams"
    assert key not in caplog.text  # the connection string is a secret


def test_a_bad_connection_string_is_said_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    secret = "InstrumentationKey=not-a-guid-but-secret"
    with caplog.at_level(logging.WARNING, logger="crag.tracing.export"):
        export = configure_tracing(
            TracingSettings(APPLICATIONINSIGHTS_CONNECTION_STRING=secret, OTEL_EXPORTER_OTLP_ENDPOINT="")
        )
    assert export is None and not tracing.enabled()
    assert "APPLICATIONINSIGHTS_CONNECTION_STRING is not usable" in caplog.text
    assert "not-a-guid-but-secret" not in caplog.text
