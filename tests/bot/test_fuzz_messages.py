"""Random activities thrown at /api/messages of the real app: never a 5xx, and the app stays up."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.paths import SAMPLE_DOCS
from tests.servers.app_process import AppProcess

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=50),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
activity_types = st.sampled_from(
    [
        "message",
        "invoke",
        "conversationUpdate",
        "messageReaction",
        "event",
        "typing",
        "endOfConversation",
        "x",
        "",
    ]
)
invoke_names = st.sampled_from(
    ["adaptiveCard/action", "message/submitAction", "signin/verifyState", "task/fetch", ""]
)


@st.composite
def activities(draw: st.DrawFn) -> dict[str, Any]:
    activity: dict[str, Any] = {
        "type": draw(activity_types),
        "id": draw(st.text(max_size=20)),
        # Replies go to a sink that accepts anything (a dead connector is tested elsewhere: its
        # retries would make each example take seconds).
        "serviceUrl": SINK_URL,
        "channelId": draw(st.sampled_from(["emulator", "msteams", "webchat", "directline", ""])),
        "conversation": draw(
            st.fixed_dictionaries(
                {"id": st.text(min_size=1, max_size=30)},
                optional={"conversationType": st.sampled_from(["personal", "channel", "groupChat", "x"])},
            )
        ),
        "from": draw(st.fixed_dictionaries({"id": st.text(max_size=20)})),
        "recipient": {"id": "bot"},
    }
    for key, strategy in (
        ("text", st.text(max_size=300)),
        ("value", json_values),
        ("name", invoke_names),
        ("entities", st.lists(json_values, max_size=3)),
        ("attachments", st.lists(json_values, max_size=2)),
        ("locale", st.text(max_size=8)),
        ("replyToId", st.text(max_size=20)),
        ("membersAdded", st.lists(st.fixed_dictionaries({"id": st.text(max_size=10)}), max_size=3)),
        ("channelData", json_values),
    ):
        if draw(st.booleans()):
            activity[key] = draw(strategy)
    return activity


def _start_sink() -> str:
    class Sink(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = b'{"id": "sink"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_PUT = do_POST

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


SINK_URL = _start_sink()


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppProcess]:
    proc = AppProcess(tmp_path_factory.mktemp("fuzz"), SAMPLE_DOCS)
    proc.start()
    yield proc
    proc.stop()


def _post(app: AppProcess, body: bytes, content_type: str = "application/json") -> int:
    request = urllib.request.Request(
        app.url + "/api/messages", data=body, headers={"Content-Type": content_type}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(activity=activities())
def test_random_activities_never_get_a_5xx(app: AppProcess, activity: dict[str, Any]) -> None:
    status = _post(app, json.dumps(activity).encode())
    # An invoke the bot does not implement is answered 200 with statusCode 501 in the invoke body.
    assert status < 500, (status, activity)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_random_bodies_never_get_a_5xx(app: AppProcess, body: bytes) -> None:
    assert _post(app, body) < 500


def test_app_is_still_healthy_after_fuzzing(app: AppProcess) -> None:
    assert app.health()["status"] == "ok"
    assert "Traceback" not in app.log() or "unhandled error serving" not in app.log()
