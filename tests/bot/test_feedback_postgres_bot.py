"""The bot with its feedback in PostgreSQL: two `python app.py` instances sharing one database
(an answer given by one is rated through the other), Postgres stopped under a running bot (a polite
reply, the rating kept and replayed once), a bad setting refused at start, and writers killed with
SIGKILL keeping every rating they acknowledged."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg

from tests.fakes.bot_connector import FakeConnector, find_by_id, make_activity
from tests.paths import ROOT, SAMPLE_DOCS
from tests.servers.app_process import AppProcess
from tests.servers.harness import free_port
from tests.servers.postgres import PostgresServer

CONV = "19:general@thread.tacv2;messageid=1700000000001"
BOT = {"id": "28:bot-app-id", "name": "CRAG Assistant"}


def teams(connector: FakeConnector, user: str, **extra: Any) -> dict[str, Any]:
    """An activity in a Teams channel thread (no streaming there: one answer message)."""
    activity = make_activity(
        connector.url, channel_id="msteams", conversation_id=CONV, locale="ja-JP", user_id=user, **extra
    )
    activity["from"] = {"id": user, "name": user}
    activity["recipient"] = BOT
    activity["conversation"] = {"id": CONV, "conversationType": "channel", "tenantId": "tenant-1"}
    activity["channelData"] = {"tenant": {"id": "tenant-1"}}
    if "text" in extra:
        activity["text"] = f"<at>{BOT['name']}</at> {extra['text']}"
        activity["entities"] = [{"type": "mention", "text": f"<at>{BOT['name']}</at>", "mentioned": BOT}]
    return activity


def native_like(connector: FakeConnector, user: str, message_id: str) -> dict[str, Any]:
    value = {"actionName": "feedback", "actionValue": {"reaction": "like", "feedback": "{}"}}
    return teams(
        connector, user, type="invoke", name="message/submitAction", replyToId=message_id, value=value
    )


def execute(connector: FakeConnector, user: str, result_id: str, reaction: str) -> dict[str, Any]:
    data = {"action": "crag.feedback", "result_id": result_id, "reaction": reaction}
    value = {"action": {"type": "Action.Execute", "verb": "crag.feedback", "data": data}, "trigger": "manual"}
    return teams(connector, user, type="invoke", name="adaptiveCard/action", value=value)


async def post(app: AppProcess, activity: dict[str, Any]) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(app.url + "/api/messages", json=activity) as resp,
    ):
        body = await resp.read()
        return resp.status, (json.loads(body) if body else None)


async def fetch(dsn: str, query: str, *args: object) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(dsn)
    try:
        return [dict(r) for r in await conn.fetch(query, *args)]
    finally:
        await conn.close()


async def test_two_instances_share_answers_and_ratings_and_survive_postgres_going_down(
    postgres_dsn: str, postgres_server: PostgresServer, connector: FakeConnector, tmp_path: Path
) -> None:
    env = {"CRAG_FEEDBACK_STORE": "postgres", "CRAG_POSTGRES_URL": postgres_dsn, "CRAG_EMBEDDINGS": "off"}
    one = AppProcess(tmp_path / "one", SAMPLE_DOCS, **env)
    two = AppProcess(tmp_path / "two", SAMPLE_DOCS, **env)
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    await asyncio.gather(asyncio.to_thread(one.start), asyncio.to_thread(two.start))
    try:
        # 1. Instance one answers; the answer and its message id are in the shared database.
        status, _ = await post(
            one, teams(connector, "29:asker", text="有給休暇の繰越しは最大何日までできますか？")
        )
        assert status == 201
        [answer] = connector.messages()
        assert "20日" in answer["text"]
        [stored] = await fetch(
            postgres_dsn, "SELECT result_id FROM answers WHERE message_id = $1", answer["id"]
        )
        result_id = stored["result_id"]

        # 2. Teams' native thumbs reach instance two, which finds the answer by its message id.
        assert await post(two, native_like(connector, "29:asker", answer["id"])) == (200, {})
        # 3. Action.Execute through instance two: the card instance one stored comes back, thanked.
        status, body = await post(two, execute(connector, "29:other", result_id, "down"))
        assert status == 200 and body["statusCode"] == 200 and find_by_id(body["value"], "thanks")
        rows = await fetch(postgres_dsn, "SELECT user_id, reaction, source FROM answer_feedback ORDER BY id")
        assert rows == [
            {"user_id": "29:asker", "reaction": "up", "source": "teams"},
            {"user_id": "29:other", "reaction": "down", "source": "card-execute"},
        ]

        # 4. Postgres stops under the running bots: a rating is acknowledged politely (kept aside),
        # a native rating cannot find its message and is refused with a 503, never a stack trace.
        with postgres_server.stopped():
            status, body = await post(one, execute(connector, "29:third", result_id, "up"))
            assert status == 200 and body["statusCode"] == 200
            thanks = json.dumps(body["value"], ensure_ascii=False)
            assert "フィードバックありがとうございます" in thanks and "Traceback" not in thanks
            status, body = await post(two, native_like(connector, "29:fourth", answer["id"]))
            assert status == 503 and "Traceback" not in json.dumps(body)
            pending = tmp_path / "one" / "feedback-postgres.pending.jsonl"
            assert [json.loads(x)["kind"] for x in pending.read_text("utf-8").splitlines()] == ["feedback"]
        assert "feedback database unavailable: kept 1 write(s) (feedback)" in one.log()
        assert postgres_dsn not in one.log() + two.log()

        # 5. Back up: once the short pause after a refusal is over, the next rating replays the kept one.
        await asyncio.sleep(1.5)
        status, body = await post(one, execute(connector, "29:fifth", result_id, "up"))
        assert status == 200 and find_by_id(body["value"], "thanks")
        assert not pending.exists()
        users = [
            r["user_id"] for r in await fetch(postgres_dsn, "SELECT user_id FROM answer_feedback ORDER BY 1")
        ]
        assert users == ["29:asker", "29:fifth", "29:other", "29:third"]
    finally:
        one.stop()
        two.stop()


def test_a_bad_postgres_setting_stops_the_app_at_start_with_a_clear_message(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    def start(**settings: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "CRAG_FEEDBACK_STORE": "postgres", "CRAG_DOCS_DIR": str(SAMPLE_DOCS)}
        env.pop("CRAG_POSTGRES_URL", None)
        env.update(
            CRAG_FEEDBACK_DB=str(tmp_path / "fb.sqlite3"), CRAG_STATE_DB=str(tmp_path / "state.sqlite3")
        )
        env.update(CRAG_EMBEDDINGS="off", PORT=str(free_port()), **settings)
        return subprocess.run(
            [sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )

    missing = start()
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "invalid settings: CRAG_FEEDBACK_STORE=postgres needs CRAG_POSTGRES_URL" in missing.stderr
    # The server answers but has no such database: a setting to fix, not an outage to wait out.
    dsn = f"postgresql://postgres:Pw-n0t-shown@127.0.0.1:{postgres_server.port}/no_such_db"
    refused = start(CRAG_POSTGRES_URL=dsn)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert (
        f"invalid settings: feedback database 127.0.0.1:{postgres_server.port}/no_such_db" in refused.stderr
    )
    assert "Pw-n0t-shown" not in refused.stderr + refused.stdout


WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from crag.core.models import Branch, CragResult
    from feedback.postgres_store import PostgresFeedbackStore

    async def main():
        store = PostgresFeedbackStore({dsn!r}, Path({pending!r}), pool_size=4)
        await store.open()
        i = 0
        while True:
            r = CragResult(question=f"{name} q{{i}}", language="en", branch=Branch.CORRECT, answer="a")
            await store.record_answer(r, "c", "asker", "emulator")
            await store.record_feedback(r.id, "up", "c", f"{name}-u{{i}}", "emulator")
            print(r.id, flush=True)  # acknowledged only after the commit returned
            i += 1

    asyncio.run(main())
    """
)


def test_acknowledged_ratings_survive_instances_killed_mid_write(postgres_dsn: str, tmp_path: Path) -> None:
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER.format(
                    root=str(ROOT), dsn=postgres_dsn, pending=str(tmp_path / f"{n}.pending.jsonl"), name=n
                ),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in ("a", "b")
    ]
    acked: list[str] = []
    for proc in procs:
        assert proc.stdout is not None
        for _ in range(80):
            line = proc.stdout.readline()
            if not line:
                break
            acked.append(line.strip())
    for proc in procs:
        os.kill(proc.pid, signal.SIGKILL)  # mid-write: no clean shutdown
        proc.wait()
    assert len(acked) >= 160

    async def stored() -> set[str]:
        return {r["result_id"] for r in await fetch(postgres_dsn, "SELECT result_id FROM answer_feedback")}

    assert set(acked) <= asyncio.run(stored())
    assert not any(p.exists() for p in tmp_path.glob("*.pending.jsonl"))  # nothing needed keeping aside
