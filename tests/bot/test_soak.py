"""Load and soak on loopback (embedded default): 200 conversations x 5 turns, each answer rated.

Bounded in count and time. Asserts no errors, every rating in the database, and memory that does
not keep growing; prints the figures for the notes.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from tests.fakes.bot_connector import FakeConnector, card_of, make_activity
from tests.paths import SAMPLE_DOCS
from tests.servers.app_process import AppProcess

CONVERSATIONS, TURNS, PARALLEL = 200, 5, 20


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppProcess]:
    proc = AppProcess(tmp_path_factory.mktemp("soak"), SAMPLE_DOCS, CRAG_CACHE_TTL="0")
    proc.start()
    yield proc
    proc.stop()


async def test_soak(
    app: AppProcess, connector: FakeConnector, sample_questions: list[dict[str, str]]
) -> None:
    assert app.proc is not None
    questions = [q["question"] for q in sample_questions]
    latencies: list[float] = []
    errors: list[str] = []
    clicks = 0
    gate = asyncio.Semaphore(PARALLEL)

    async def post(session: aiohttp.ClientSession, activity: dict[str, object]) -> int:
        async with session.post(app.url + "/api/messages", json=activity) as resp:
            return resp.status

    async def conversation(session: aiohttp.ClientSession, c: int) -> None:
        nonlocal clicks
        async with gate:
            for t in range(TURNS):
                ask = make_activity(
                    connector.url,
                    text=questions[(c * TURNS + t) % len(questions)],
                    conversation_id=f"soak-{c}",
                    user_id=f"u{c}",
                )
                started = time.perf_counter()
                status = await post(session, ask)
                latencies.append((time.perf_counter() - started) * 1000)
                answer = next(
                    (a for a in connector.activities if a["_path"].endswith(ask["id"]) and card_of(a)), None
                )
                if status != 201 or answer is None:
                    errors.append(f"turn {c}/{t}: HTTP {status}")
                    continue
                up = next(
                    a
                    for a in card_of(answer)["actions"]
                    if a["data"]["reaction"] == ("up" if t % 2 else "down")
                )  # type: ignore[index]
                click = make_activity(
                    connector.url, value=up["data"], conversation_id=f"soak-{c}", user_id=f"u{c}"
                )
                if await post(session, click) != 201:
                    errors.append(f"click {c}/{t}")
                else:
                    clicks += 1

    async with aiohttp.ClientSession() as session:
        # Warm up (caches, first allocations), then measure memory across the soak.
        await asyncio.gather(*(conversation(session, c) for c in range(CONVERSATIONS, CONVERSATIONS + 10)))
        warm = rss_mb(app.proc.pid)
        latencies.clear()
        started = time.perf_counter()
        await asyncio.gather(*(conversation(session, c) for c in range(CONVERSATIONS)))
        seconds = time.perf_counter() - started
    grown = rss_mb(app.proc.pid) - warm
    with sqlite3.connect(app.feedback_db) as conn:
        stored = conn.execute(
            "SELECT COUNT(*) FROM answer_feedback WHERE conversation_id LIKE 'soak-%'"
        ).fetchone()[0]
    p95 = statistics.quantiles(latencies, n=20)[18]
    print(
        json.dumps(
            {
                "turns": len(latencies),
                "turns_per_s": round(len(latencies) / seconds, 1),
                "p50_ms": round(statistics.median(latencies), 1),
                "p95_ms": round(p95, 1),
                "errors": len(errors),
                "feedback_expected": clicks,
                "feedback_found": stored,
                "rss_growth_mb": round(grown, 1),
            }
        )
    )
    assert errors == []
    assert len(latencies) == CONVERSATIONS * TURNS
    assert stored == CONVERSATIONS * TURNS + 10 * TURNS  # every click of the soak and the warm-up
    assert grown < 60  # memory is stable: no growth with the number of conversations served
