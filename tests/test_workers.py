"""`python app.py --workers 2`: two processes serve one port (SO_REUSEPORT) with shared state.

Every request here opens its own connection, so the kernel spreads them over both workers; a
conversation's turns and its rating land on either, and must find what the other stored.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.crag.text.test_followup import DOCS, PREVIOUS
from tests.fakes.bot_connector import FakeConnector, card_of, find_by_id, make_activity
from tests.servers.app_process import AppProcess

CONVERSATIONS = 8


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppProcess]:
    tmp = tmp_path_factory.mktemp("workers")
    docs = tmp / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, "utf-8")
    proc = AppProcess(tmp, docs, "--workers", "2", CRAG_CACHE_TTL="0")
    proc.start(timeout=180)
    yield proc
    proc.stop()


async def post(app: AppProcess, activity: dict[str, Any]) -> int:
    # A new session (and so a new connection) per request: nothing pins a conversation to a worker.
    async with (
        aiohttp.ClientSession() as session,
        session.post(app.url + "/api/messages", json=activity) as r,
    ):
        return r.status


def workers_that_answered(log: str) -> set[str]:
    return set(re.findall(r" (w\d) aiohttp\.access: .*\"POST /api/messages", log))


async def until_both_workers_serve(app: AppProcess, timeout: float = 120.0) -> None:
    """The app answers health as soon as one worker listens; the other may still be loading (on a
    busy machine, for seconds), and every connection until it binds the port goes to the first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        async with aiohttp.ClientSession() as session, session.get(app.url + "/api/health") as r:
            await r.read()
        if set(re.findall(r" (w\d) aiohttp\.access: .*\"GET /api/health", app.log())) == {"w1", "w2"}:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"both workers did not answer within {timeout} s:\n{app.log()}")


def worker_pids(app: AppProcess) -> list[int]:
    assert app.proc is not None
    children = Path(f"/proc/{app.proc.pid}/task/{app.proc.pid}/children").read_text().split()
    return [int(pid) for pid in children]


async def test_turns_and_ratings_spread_over_two_workers_share_their_state(
    app: AppProcess, connector: FakeConnector
) -> None:
    await until_both_workers_serve(app)

    async def conversation(c: int) -> dict[str, Any]:
        conv = f"conv-workers-{c}"
        first = make_activity(connector.url, text=PREVIOUS[0].question, conversation_id=conv)
        assert await post(app, first) == 201
        # Answered in the context of the first question only if this worker sees the history the
        # other may have stored (conversation state in the shared SQLite file).
        follow = make_activity(
            connector.url, text="what about for office staff at the plants?", conversation_id=conv
        )
        assert await post(app, follow) == 201
        card = next(
            card_of(a) for a in connector.activities if a.get("replyToId") == follow["id"] and card_of(a)
        )
        up = next(a for a in card["actions"] if a["data"].get("reaction") == "up")
        click = make_activity(connector.url, value=up["data"], conversation_id=conv)
        assert await post(app, click) == 201
        return card

    cards = await asyncio.gather(*(conversation(c) for c in range(CONVERSATIONS)))
    for card in cards:
        answer = find_by_id(card, "answer")
        assert answer and "9:30" in answer["text"], answer
    # Each rating was recorded once, whichever worker recorded the answer it rates.
    with sqlite3.connect(app.feedback_db) as db:
        rows = db.execute("SELECT conversation_id, reaction FROM answer_feedback").fetchall()
    assert sorted(rows) == sorted((f"conv-workers-{c}", "up") for c in range(CONVERSATIONS))
    assert workers_that_answered(app.log()) == {"w1", "w2"}


def test_with_one_worker_per_core_each_worker_keeps_to_its_own(app: AppProcess) -> None:
    cores = os.sched_getaffinity(0)
    held = [os.sched_getaffinity(pid) for pid in worker_pids(app)]
    if len(cores) == 2:  # two workers, two cores: one each
        assert sorted(held, key=min) == [{c} for c in sorted(cores)]
        assert "one worker per core" in app.log()
    else:  # more or fewer cores than workers: the kernel places them
        assert all(h == cores for h in held)


async def test_a_killed_worker_is_replaced_and_the_port_keeps_answering(
    app: AppProcess, connector: FakeConnector
) -> None:
    before = worker_pids(app)
    assert len(before) == 2
    os.kill(before[0], signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        now = worker_pids(app)
        if len(now) == 2 and before[0] not in now:
            break
        await asyncio.sleep(0.2)
    assert len(now) == 2 and before[0] not in now and before[1] in now
    assert "worker 1 exited with -9; restarting it" in app.log() or "worker 2 exited with -9" in app.log()
    for c in range(6):
        ask = make_activity(connector.url, text="My VPN keeps dropping", conversation_id=f"conv-after-{c}")
        assert await post(app, ask) == 201
    answered = [
        a for a in connector.activities if card_of(a) and a["conversation"]["id"].startswith("conv-after")
    ]
    assert len(answered) == 6
    assert all("GlobalConnect" in json.dumps(card_of(a), ensure_ascii=False) for a in answered)


def test_the_local_web_chat_says_it_needs_one_worker(app: AppProcess) -> None:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(app.url + "/api/directline/token", method="POST", data=b"")
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(request, timeout=5)
    assert error.value.code == 503
    assert "one worker" in json.loads(error.value.read())["error"]["message"]


def test_workers_move_freely_when_pinning_is_off_whatever_core_they_inherit(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    tmp = tmp_path_factory.mktemp("unpinned")
    docs = tmp / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, "utf-8")
    # CRAG_PIN_CORE as if this app were started by a pinned worker: not the new workers' setting.
    unpinned = AppProcess(tmp, docs, "--workers", "2", CRAG_PIN_WORKERS="false", CRAG_PIN_CORE="0")
    unpinned.start(timeout=180)
    try:
        assert [os.sched_getaffinity(pid) for pid in worker_pids(unpinned)] == [os.sched_getaffinity(0)] * 2
        assert "one worker per core" not in unpinned.log()
    finally:
        unpinned.stop()
