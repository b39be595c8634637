"""Three `python app.py` instances behind an imaginary load balancer, sharing real engines:
conversation state in Azure Blob Storage (Azurite), the answer cache in Redis, answers and ratings
in PostgreSQL. Each instance has its own index folder over the same documents, as separate machines
would. A conversation's turns go round-robin and keep their history; an answer given on one is a
cache hit on another; ratings land once whichever instance records them; and an instance killed
with SIGKILL under load loses no rating it acknowledged.

(The local Direct Line of /chat keeps its conversations in one process: it is not part of this.)
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from tests.crag.text.test_followup import DOCS, PREVIOUS
from tests.fakes.bot_connector import FakeConnector, card_of, find_by_id, make_activity
from tests.servers.app_process import AppProcess
from tests.servers.azurite import AzuriteBlob, running_azurite
from tests.servers.redis import RedisServer, running_redis


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with running_redis() as server:
        yield server


@pytest.fixture(scope="module")
def azurite() -> Iterator[AzuriteBlob]:
    with running_azurite() as server:
        yield server


@pytest.fixture
def instances(
    tmp_path: Path, redis: RedisServer, azurite: AzuriteBlob, postgres_dsn: str
) -> Iterator[list[AppProcess]]:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, "utf-8")
    env = {
        "STATE_STORAGE": "blob",
        "AZURE_STORAGE_CONNECTION_STRING": azurite.connection_string,
        "AZURE_STORAGE_CONTAINER": f"state-{uuid.uuid4().hex[:12]}",
        "CRAG_CACHE_URL": redis.url,
        "CRAG_FEEDBACK_STORE": "postgres",
        "CRAG_POSTGRES_URL": postgres_dsn,
        # One public address for all, as behind a load balancer: it is the base of the answers'
        # links, and so part of the index version the cache is keyed by.
        "PUBLIC_BASE_URL": "http://localhost:3978",
    }
    apps = []
    for i in range(3):
        home = tmp_path / f"instance-{i}"
        home.mkdir()
        apps.append(AppProcess(home, docs, **env))
    threads = [threading.Thread(target=app.start, kwargs={"timeout": 180}) for app in apps]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        for app in apps:
            assert app.proc is not None and app.proc.poll() is None, app.log()
            app.health()
        yield apps
    finally:
        for app in apps:
            app.stop()


async def post(app: AppProcess, activity: dict[str, Any]) -> int:
    async with (
        aiohttp.ClientSession() as session,
        session.post(app.url + "/api/messages", json=activity) as r,
    ):
        return r.status


def reply_card(connector: FakeConnector, activity: dict[str, Any]) -> dict[str, Any]:
    return next(c for a in connector.activities if a.get("replyToId") == activity["id"] and (c := card_of(a)))


def answer_text(card: dict[str, Any]) -> str:
    answer = find_by_id(card, "answer")
    assert answer is not None
    return str(answer["text"])


def acknowledged(connector: FakeConnector, click: dict[str, Any]) -> bool:
    return any(
        a.get("replyToId") == click["id"] and "👍" in str(a.get("text", "")) for a in connector.activities
    )


async def ratings(dsn: str) -> list[tuple[str, str]]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT conversation_id, user_id FROM answer_feedback")
    finally:
        await conn.close()
    return sorted((r["conversation_id"], r["user_id"]) for r in rows)


async def test_a_conversation_round_robin_keeps_its_history_and_the_cache_is_shared(
    instances: list[AppProcess], connector: FakeConnector
) -> None:
    a, b, c = instances
    first = make_activity(connector.url, text=PREVIOUS[0].question, conversation_id="conv-rr")
    assert await post(a, first) == 201
    assert "10:30" in answer_text(reply_card(connector, first))
    # The follow-up only makes sense with the first question, which instance A stored in Blob state.
    follow = make_activity(
        connector.url, text="what about for office staff at the plants?", conversation_id="conv-rr"
    )
    assert await post(b, follow) == 201
    assert "9:30" in answer_text(reply_card(connector, follow))

    # The same question, asked afresh on C after A answered it, comes from Redis.
    hits_before = c.health()["cache"]["hits"]
    assert c.health()["cache"]["backend"] == "redis"
    ask = make_activity(
        connector.url, text="My VPN keeps dropping, what should I do?", conversation_id="conv-x1"
    )
    assert await post(a, ask) == 201
    again = make_activity(
        connector.url, text="My VPN keeps dropping, what should I do?", conversation_id="conv-x2"
    )
    assert await post(c, again) == 201
    assert c.health()["cache"]["hits"] == hits_before + 1
    assert answer_text(reply_card(connector, again)) == answer_text(reply_card(connector, ask))


async def test_ratings_land_once_and_a_killed_instance_loses_none_it_acknowledged(
    instances: list[AppProcess], connector: FakeConnector, postgres_dsn: str
) -> None:
    rr = itertools.cycle(range(3))
    clicks: list[dict[str, Any]] = []

    async def rate(n: int, ask_on: int, rate_on: int) -> None:
        conv, user = f"conv-rate-{n}", f"user-{n}"
        ask = make_activity(connector.url, text="My VPN keeps dropping", conversation_id=conv, user_id=user)
        try:
            if await post(instances[ask_on], ask) != 201:
                return
        except aiohttp.ClientError:  # asked the killed instance
            return
        up = next(x for x in reply_card(connector, ask)["actions"] if x["data"].get("reaction") == "up")
        click = make_activity(connector.url, value=up["data"], conversation_id=conv, user_id=user)
        clicks.append(click)
        # A ClientError: the instance was killed under this request, which is then not acknowledged.
        with contextlib.suppress(aiohttp.ClientError):
            await post(instances[rate_on], click)

    # Answered on one instance, rated through the next.
    await asyncio.gather(*(rate(n, (i := next(rr)), (i + 1) % 3) for n in range(9)))
    assert await ratings(postgres_dsn) == sorted((f"conv-rate-{n}", f"user-{n}") for n in range(9))
    assert all(acknowledged(connector, c) for c in clicks)

    # Under load, instance C is killed with SIGKILL; its in-flight requests fail, the others go on.
    victim = instances[2]
    assert victim.proc is not None

    async def kill_soon() -> None:
        await asyncio.sleep(0.3)
        os.kill(victim.proc.pid, signal.SIGKILL)  # type: ignore[union-attr]

    clicks.clear()
    await asyncio.gather(kill_soon(), *(rate(n, n % 3, (n + 1) % 3) for n in range(100, 160)))
    assert victim.proc.wait(timeout=10) == -signal.SIGKILL
    stored = set(await ratings(postgres_dsn))
    acked = [c for c in clicks if acknowledged(connector, c)]
    assert len(acked) >= 20  # the two surviving instances kept answering and rating
    lost = [
        c["conversation"]["id"] for c in acked if (c["conversation"]["id"], c["from"]["id"]) not in stored
    ]
    assert lost == []
    assert len(stored) == len(set(stored))  # no rating twice
