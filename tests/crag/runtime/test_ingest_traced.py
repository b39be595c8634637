"""crag-ingest's run as one span (crag/runtime/traced.py), exported to a fake OTLP collector on 127.0.0.1:
the Azure indexing job's outcome reaches where the bot's traces go, a failure marked as one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from crag.config.tracing import TracingSettings
from crag.runtime.traced import traced_run
from crag.tracing import spans as tracing
from tests.fakes.graph_fixtures import Graph
from tests.fakes.otlp import FakeCollector
from tests.paths import ROOT

ERROR = 2  # the OTLP status code of a failed span (0: unset, 1: ok)


def _settings(collector: FakeCollector) -> TracingSettings:
    return TracingSettings(
        OTEL_EXPORTER_OTLP_ENDPOINT=collector.url,
        APPLICATIONINSIGHTS_CONNECTION_STRING="",
        OTEL_SERVICE_NAME="crag-ingest",
    )


async def test_the_run_s_outcome_is_one_span_failed_when_it_fails() -> None:
    collector = FakeCollector()
    await collector.start()
    try:

        async def fine() -> int:
            return 0

        async def failing() -> int:
            return 3

        async def broken() -> int:
            raise RuntimeError("the index service refused the upload")

        assert (
            await traced_run("crag.ingest", {"crag.ingest.source": "sharepoint"}, _settings(collector), fine)
            == 0
        )
        assert await traced_run("crag.ingest", {}, _settings(collector), failing) == 3
        with pytest.raises(RuntimeError):
            await traced_run("crag.ingest", {}, _settings(collector), broken)
        spans = await collector.wait_for("crag.ingest", 3)
    finally:
        await collector.stop()
    assert not tracing.enabled()  # each run closes its exporter
    assert [s.status_code for s in spans] == [0, ERROR, ERROR]
    assert [s.attributes.get("crag.exit_code") for s in spans] == [0, 3, None]
    assert spans[0].attributes["crag.ingest.source"] == "sharepoint"
    assert {s.resource["service.name"] for s in spans} == {"crag-ingest"}


async def test_the_cli_s_failed_sync_reaches_the_collector(graph: Graph, tmp_path: Path) -> None:
    """The job's very command, failing (Graph refuses its token): a failed crag.ingest span."""
    collector = FakeCollector()
    await collector.start()
    try:
        graph.fake.reject_tokens = True
        env = {
            **os.environ,
            **graph.env(tmp_path),
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
            "OTEL_SERVICE_NAME": "crag-ingest",
            "APPLICATIONINSIGHTS_CONNECTION_STRING": "",
            "AZURE_SEARCH_ENDPOINT": "https://127.0.0.1:9",
            "AZURE_SEARCH_API_KEY": "unused",
        }
        done = subprocess.run(
            [sys.executable, "-m", "crag.cli.ingest", "--source", "sharepoint", "--target", "azure"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        spans = await collector.wait_for("crag.ingest")
    finally:
        await collector.stop()
    assert done.returncode != 0, done.stdout
    (span,) = spans
    assert span.status_code == ERROR and span.attributes["crag.ingest.target"] == "azure"
    assert span.attributes["crag.exit_code"] == done.returncode
