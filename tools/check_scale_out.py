"""Check a running scale-out stack (compose.yaml) from outside, through its proxy.

    .venv/bin/python tools/check_scale_out.py [PROXY_URL] [--replicas N] [--postgres DSN]

PROXY_URL defaults to http://localhost:8080, DSN to the compose stack's PostgreSQL on 127.0.0.1
(CRAG_POSTGRES_PORT, CRAG_POSTGRES_PASSWORD as for compose.yaml). It shows, on the sample documents
the stack serves by default:

1. every replica (--replicas, default 2: compose.yaml's; 3 after `--scale bot=3`) answers behind the
   proxy, with the answer cache in Redis;
2. one conversation's turns alternate between the instances (the proxy round-robins) and keep their
   history: a follow-up is answered as read with the question before it, which another instance
   stored in Blob state (the same follow-up in a new conversation gets another answer);
3. a question answered on one instance is a cache hit on the other (the answer row in PostgreSQL
   says so);
4. a rating posted once through one instance, for an answer given by the other, is stored once;
5. the local Web Chat (/chat) works through the proxy: its Direct Line keeps a conversation in one
   instance's memory, and the proxy keeps each client on one instance for it.

It talks to the bot as a Bot Framework client with deliveryMode expectReplies, so the replies come
back in the HTTP response: without an app id the bot posts replies only to a loopback serviceUrl,
and inside a container that is the container itself. The proxy names the instance that answered in
X-Served-By (deploy/compose/nginx.conf.template). Exit status 0 when every check passed.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import asyncpg

DEFAULT_PROXY = "http://localhost:8080"
# compose.yaml's PostgreSQL, with the same variables (and defaults) the stack was started with.
DEFAULT_DSN = (
    f"postgresql://crag:{os.environ.get('CRAG_POSTGRES_PASSWORD', 'crag-local-only')}"
    f"@127.0.0.1:{os.environ.get('CRAG_POSTGRES_PORT', '15432')}/crag"
)
SERVED_BY = "X-Served-By"
# Questions about the sample documents (sample_docs/leave_policy.md): "what about three and a half
# years?" says nothing of paid leave, so only the question before it makes it answerable (14 days);
# asked alone it is refused.
FIRST = "入社して丸5年半たったら有給何日になる？"
FIRST_FACT = "18日"
FOLLOW_UP = "じゃあ3年半だと？"
FOLLOW_UP_FACT = "14日"
CACHED = "What is the monthly remote work allowance?"


@dataclass
class Reply:
    instance: str
    status: int
    activities: list[dict[str, Any]]

    @property
    def cards(self) -> list[dict[str, Any]]:
        """The Adaptive Cards of the replies (a welcome card may come before the answer's)."""
        return [
            attachment["content"]
            for activity in self.activities
            for attachment in activity.get("attachments") or []
            if attachment.get("contentType") == "application/vnd.microsoft.card.adaptive"
        ]

    @property
    def texts(self) -> str:
        """Every text of the replies and their cards, flattened."""
        out: list[str] = []

        def walk(node: object) -> None:
            if isinstance(node, dict):
                for key, value in node.items():
                    if key == "text" and isinstance(value, str):
                        out.append(value)
                    else:
                        walk(value)
            elif isinstance(node, list):
                for value in node:
                    walk(value)

        walk(self.activities)
        return "\n".join(out)

    def answer(self) -> str:
        found = _by_id(self.cards, "answer")
        return str(found.get("text", "")) if found else ""

    def feedback_data(self, reaction: str) -> dict[str, Any]:
        for card in self.cards:
            for action in card.get("actions", []):
                data = action.get("data") or {}
                if data.get("reaction") == reaction:
                    return dict(data)
        raise LookupError(f"no {reaction!r} feedback button on the answer card")


def _by_id(node: object, wanted: str) -> dict[str, Any] | None:
    if isinstance(node, dict):
        if node.get("id") == wanted:
            return node
        node = list(node.values())
    if isinstance(node, list):
        for value in node:
            if (found := _by_id(value, wanted)) is not None:
                return found
    return None


@dataclass
class Checks:
    failures: list[str] = field(default_factory=list)

    def check(self, ok: bool, what: str, detail: str = "") -> bool:
        print(f"{'ok  ' if ok else 'FAIL'} {what}{f' ({detail})' if detail else ''}")
        if not ok:
            self.failures.append(what)
        return ok


class Client:
    def __init__(self, session: aiohttp.ClientSession, proxy: str) -> None:
        self.session = session
        self.proxy = proxy.rstrip("/")

    async def say(self, conversation: str, text: str | None = None, value: Any = None) -> Reply:
        activity: dict[str, Any] = {
            "type": "message",
            "id": uuid.uuid4().hex,
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
            # Never called: with expectReplies the replies come back in the response.
            "serviceUrl": "http://127.0.0.1:9/",
            "channelId": "emulator",
            "from": {"id": f"user-{conversation}", "name": "Scale-out check", "role": "user"},
            "conversation": {"id": conversation},
            "recipient": {"id": "bot", "name": "CRAG Assistant", "role": "bot"},
            "locale": "ja-JP",
            "deliveryMode": "expectReplies",
        }
        if text is not None:
            activity["text"] = text
        if value is not None:
            activity["value"] = value
        async with self.session.post(f"{self.proxy}/api/messages", json=activity) as response:
            body = await response.json(content_type=None) if response.status == 200 else {}
            return Reply(response.headers.get(SERVED_BY, "?"), response.status, body.get("activities", []))

    async def health(self) -> tuple[str, int, dict[str, Any]]:
        async with self.session.get(f"{self.proxy}/api/health") as response:
            payload: dict[str, Any] = await response.json(content_type=None)
            return response.headers.get(SERVED_BY, "?"), response.status, payload


async def wait_for_all(client: Client, checks: Checks, timeout: float, replicas: int) -> list[str]:
    """Poll /api/health until `replicas` instances have answered 200 (the proxy goes round them)."""
    healthy: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + timeout
    while len(healthy) < replicas and time.monotonic() < deadline:
        try:
            instance, status, payload = await client.health()
        except (aiohttp.ClientError, ValueError):
            instance, status, payload = "?", 0, {}
        if status == 200:
            healthy[instance] = payload
        else:
            await asyncio.sleep(1)
    cache = {i: p.get("cache", {}).get("backend") for i, p in healthy.items()}
    checks.check(
        len(healthy) >= replicas, f"{replicas} instances answer behind the proxy", ", ".join(sorted(healthy))
    )
    checks.check(
        bool(cache) and all(b == "redis" for b in cache.values()),
        "their answer cache is in Redis",
        str(cache),
    )
    return sorted(healthy)


async def check_conversation(client: Client, checks: Checks, replicas: int) -> Reply:
    conversation = f"scale-out-{uuid.uuid4().hex[:12]}"
    first = await client.say(conversation, FIRST)
    follow = await client.say(conversation, FOLLOW_UP)
    third = await client.say(conversation, FIRST)
    fourth = await client.say(conversation, FOLLOW_UP)
    turns = [first, follow, third, fourth]
    order = " → ".join(t.instance for t in turns)
    checks.check(all(t.status == 200 for t in turns), "every turn answered", str([t.status for t in turns]))
    checks.check(
        len({t.instance for t in turns}) == min(replicas, len(turns))
        and all(a.instance != b.instance for a, b in itertools.pairwise(turns)),
        "one conversation's turns alternate between the instances",
        order,
    )
    checks.check(
        FIRST_FACT in first.answer(), f"the first question is answered ({FIRST_FACT})", first.answer()[:80]
    )
    # Read alone, the follow-up says nothing of leave: a new conversation gets another answer.
    alone = await client.say(f"scale-out-alone-{uuid.uuid4().hex[:12]}", FOLLOW_UP)
    checks.check(
        FOLLOW_UP_FACT in follow.answer() and follow.answer() != alone.answer(),
        f"the follow-up on {follow.instance} is answered in the context {first.instance} stored",
        f"{follow.answer()[:80]!r}; alone: {alone.answer()[:60]!r}",
    )
    return first


async def check_cache(client: Client, checks: Checks, db: asyncpg.Connection) -> None:
    conversations = [f"scale-out-cache-{uuid.uuid4().hex[:12]}" for _ in range(2)]
    # Asked in two new conversations, one after the other: the proxy sends them to both instances.
    # (The first may itself be a hit left by an earlier run; the second must be one.)
    asked = [await client.say(c, CACHED) for c in conversations]
    hit: dict[str, bool] = {}
    deadline = time.monotonic() + 10
    while len(hit) < 2 and time.monotonic() < deadline:  # answers are stored just after the reply
        rows = await db.fetch(
            "SELECT conversation_id, cache_hit FROM answers WHERE conversation_id = ANY($1::text[])",
            conversations,
        )
        hit = {r["conversation_id"]: r["cache_hit"] for r in rows}
        if len(hit) < 2:
            await asyncio.sleep(0.2)
    checks.check(
        asked[0].instance != asked[1].instance
        and hit.get(conversations[1]) is True
        and asked[0].answer() == asked[1].answer() != "",
        "an answer given on one instance is a cache hit on the other",
        f"{asked[0].instance} then {asked[1].instance}, stored cache_hit: {hit.get(conversations[1])}",
    )


async def check_rating(client: Client, checks: Checks, db: asyncpg.Connection, answered: Reply) -> None:
    up = answered.feedback_data("up")
    conversation = str(answered.activities[0].get("conversation", {}).get("id", ""))
    before = await db.fetchval("SELECT count(*) FROM answer_feedback WHERE result_id = $1", up["result_id"])
    click = await client.say(conversation, value=up)
    after = await db.fetchval("SELECT count(*) FROM answer_feedback WHERE result_id = $1", up["result_id"])
    checks.check(click.status == 200 and "👍" in click.texts, "the rating is acknowledged", click.instance)
    checks.check(
        before == 0 and after == 1 and click.instance != answered.instance,
        "a rating posted once, through the other instance, is stored once in PostgreSQL",
        f"answer {up['result_id']} given on {answered.instance}, rated through {click.instance}: "
        f"{before} → {after} row(s)",
    )


async def check_webchat(client: Client, checks: Checks) -> None:
    """A Direct Line conversation as the /chat page holds it: token, conversation, message, polling."""
    session, proxy = client.session, client.proxy
    served: list[str] = []
    answer = ""
    async with session.post(f"{proxy}/api/directline/token", json={}) as r:
        served.append(r.headers.get(SERVED_BY, "?"))
        token = (await r.json(content_type=None)).get("token", "") if r.status == 200 else ""
    auth = {"Authorization": f"Bearer {token}"}
    async with session.post(f"{proxy}/v3/directline/conversations", headers=auth) as r:
        served.append(r.headers.get(SERVED_BY, "?"))
        conversation = (await r.json(content_type=None)).get("conversationId", "") if r.status < 300 else ""
    activities = f"{proxy}/v3/directline/conversations/{conversation}/activities"
    message = {"type": "message", "from": {"id": "scale-out-webchat"}, "text": CACHED, "locale": "en-US"}
    async with session.post(activities, json=message, headers=auth) as r:
        served.append(r.headers.get(SERVED_BY, "?"))
    deadline = time.monotonic() + 30
    while not answer and time.monotonic() < deadline:
        async with session.get(activities, params={"watermark": ""}, headers=auth) as r:
            served.append(r.headers.get(SERVED_BY, "?"))
            body = await r.json(content_type=None) if r.status == 200 else {}
        answer = Reply(
            "", 200, [a for a in body.get("activities", []) if a.get("from", {}).get("role") == "bot"]
        ).answer()
        if not answer:
            await asyncio.sleep(0.5)
    checks.check(
        bool(answer) and len(set(served)) == 1,
        "Web Chat's Direct Line answers through the proxy, on one instance",
        f"{len(served)} requests to {', '.join(sorted(set(served)))}; {answer[:60]!r}",
    )


async def main_async(proxy: str, dsn: str, timeout: float, replicas: int = 2) -> int:
    checks = Checks()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
        client = Client(session, proxy)
        if len(await wait_for_all(client, checks, timeout, replicas)) < replicas:
            print(
                f"not all {replicas} instances are up: see `docker compose ps` / `podman ps` and their logs"
            )
            return 1
        answered = await check_conversation(client, checks, replicas)
        try:
            db = await asyncpg.connect(dsn, timeout=10)
        except (OSError, asyncpg.PostgresError) as exc:
            checks.check(False, "PostgreSQL reachable", f"{dsn.split('@')[-1]}: {exc}")
            return 1
        try:
            await check_cache(client, checks, db)
            await check_rating(client, checks, db, answered)
        finally:
            await db.close()
        await check_webchat(client, checks)
    print("all checks passed" if not checks.failures else f"{len(checks.failures)} check(s) failed")
    return 0 if not checks.failures else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("proxy", nargs="?", default=DEFAULT_PROXY, help=f"the proxy's URL ({DEFAULT_PROXY})")
    parser.add_argument(
        "--postgres", default=DEFAULT_DSN, help="the stack's PostgreSQL (default: compose.yaml's)"
    )
    parser.add_argument("--timeout", type=float, default=180, help="seconds to wait for every instance")
    parser.add_argument("--replicas", type=int, default=2, help="bot replicas behind the proxy (default 2)")
    args = parser.parse_args()
    if args.replicas < 2:
        parser.error("--replicas must be 2 or more: the checks compare instances")
    return asyncio.run(main_async(args.proxy, args.postgres, args.timeout, args.replicas))


if __name__ == "__main__":
    sys.exit(main())
