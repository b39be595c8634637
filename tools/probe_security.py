"""Attack the real bot (`python app.py`) from outside, on loopback, and say which attacks it held.

    .venv/bin/python tools/probe_security.py [--root CHECKOUT] [--ratings 300] [--idle-wait 30]

Starts the app from CHECKOUT (default: this one; point it at an older checkout to compare) over a
copy of sample_docs/ with planted files (.env, .git/config, an SVG with a script, a symlink to
/etc/passwd, a document with javascript: links), beside a fake Bot Connector and a fake OpenID
endpoint on 127.0.0.1, and repeats the attacks of issue #12. Prints one line per attack: "held" or
"FAILED" with what was seen. Every request goes to 127.0.0.1; no other address is ever contacted
(the SSRF check uses a name that cannot resolve here and looks only at the bot's HTTP answer).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import jwt
from aiohttp import web
from cryptography.hazmat.primitives import serialization

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crag.eval.loopback import serve_on_loopback  # noqa: E402
from tests.bot.test_jwt_auth import APP_ID, ISSUER, FakeOpenId  # noqa: E402
from tests.fakes.bot_connector import FakeConnector, card_of, make_activity  # noqa: E402
from tests.servers.app_process import AppProcess  # noqa: E402

Results = list[tuple[str, bool, str]]


def plant(docs: Path) -> None:
    shutil.copytree(ROOT / "sample_docs", docs)
    (docs / ".env").write_text("MicrosoftAppPassword=planted-secret\n", "utf-8")
    (docs / ".git").mkdir()
    (docs / ".git" / "config").write_text("[remote]\nurl = planted-git-secret\n", "utf-8")
    (docs / "evil.svg").write_text(
        '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(document.domain)</script></svg>', "utf-8"
    )
    (docs / "passwd.md").symlink_to("/etc/passwd")
    (docs / "portal.md").write_text(
        "# 社内ポータルの使い方\n\n## ポータルのリンク\n\n"
        "社内ポータルは [ここをクリック](javascript:alert(document.cookie)) から開きます。"
        '予備のリンクは <a href="data:text/html,<script>alert(1)</script>">こちら</a> です。\n',
        "utf-8",
    )


class Probe:
    def __init__(self, root: Path, tmp: Path) -> None:
        self.root = root
        self.tmp = tmp
        self.results: Results = []

    def record(self, name: str, held: bool, detail: str = "") -> None:
        self.results.append((name, held, detail))
        print(f"{'held  ' if held else 'FAILED'}  {name}{': ' + detail if detail else ''}", flush=True)

    def app(self, name: str, docs: Path, **env: str) -> AppProcess:
        tmp = self.tmp / name
        tmp.mkdir(exist_ok=True)
        app = AppProcess(tmp, docs, **env)
        app.env["PYTHONPATH"] = str(self.root)
        app.proc = None
        return app

    def start(self, app: AppProcess, timeout: float = 120) -> None:
        # AppProcess runs app.py of this checkout; run the one under test instead.
        app._log = app.log_path.open("wb")
        app.proc = subprocess.Popen(
            [sys.executable, "app.py"], cwd=self.root, env=app.env, stdout=app._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if app.proc.poll() is not None:
                raise RuntimeError(f"app exited with {app.proc.returncode}:\n{app.log()[-3000:]}")
            try:
                with socket.create_connection(("127.0.0.1", app.port), timeout=1):
                    pass
                if _get_status(app.url + "/api/health") == 200:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"app not healthy in {timeout}s:\n{app.log()[-3000:]}")


def _get_status(url: str, headers: dict[str, str] | None = None) -> int:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


async def fetch(
    session: aiohttp.ClientSession, method: str, url: str, **kwargs: Any
) -> tuple[int, str, dict[str, str]]:
    async with session.request(method, url, **kwargs) as resp:
        return resp.status, await resp.text(errors="replace"), dict(resp.headers)


async def raw_request(port: int, data: bytes, timeout: float = 10) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    try:
        head = await asyncio.wait_for(reader.read(200), timeout)
    finally:
        writer.close()
    return head.decode("latin-1")


def deep_json(depth: int = 5000) -> str:
    return "[" * depth + "]" * depth


async def local_mode(probe: Probe, ratings: int, idle_wait: float) -> None:
    docs = probe.tmp / "docs"
    plant(docs)
    connector = FakeConnector()
    await connector.start()
    app = probe.app("local", docs)
    probe.start(app)
    try:
        async with aiohttp.ClientSession() as s:
            await _docs_attacks(probe, s, app)
            await _turn_attacks(probe, s, app, connector)
            await _edge_attacks(probe, s, app, connector)
            await _csv_export(probe, s, app, connector)
            await _contention(probe, s, app, connector, ratings)
        await _slowloris(probe, app, idle_wait)
        probe.record("log injection (conversation id with a newline)", "FORGED-LINE" not in _line_starts(app))
    finally:
        app.stop()
        await connector.stop()


def _line_starts(app: AppProcess) -> str:
    return "\n".join(line[:12] for line in app.log().splitlines())


async def _docs_attacks(probe: Probe, s: aiohttp.ClientSession, app: AppProcess) -> None:
    for path in ("/docs/.env", "/docs/.git/config", "/docs/passwd.md"):
        status, body, _ = await fetch(s, "GET", app.url + path)
        leaked = status == 200 and ("planted" in body or "root:" in body)
        probe.record(f"GET {path}", not leaked, f"HTTP {status}")
    status, body, headers = await fetch(s, "GET", app.url + "/docs/evil.svg")
    active = status == 200 and "svg" in headers.get("Content-Type", "")
    sandboxed = "sandbox" in headers.get("Content-Security-Policy", "") and headers.get(
        "X-Content-Type-Options"
    )
    probe.record("SVG with a script on the bot's origin", not active or bool(sandboxed), f"HTTP {status}")
    status, _, _ = await fetch(s, "GET", app.url + "/docs/%00")
    probe.record("NUL byte in a /docs path", status < 500, f"HTTP {status}")


async def _ask(
    s: aiohttp.ClientSession, app: AppProcess, connector: FakeConnector, text: str, **extra: Any
) -> tuple[int, list[dict[str, Any]]]:
    since = len(connector.activities)
    conv = extra.pop("conversation_id", f"probe-{time.monotonic_ns()}")
    activity = make_activity(connector.url, text=text, conversation_id=conv, **extra)
    status, _, _ = await fetch(s, "POST", app.url + "/api/messages", json=activity)
    messages = await connector.wait_for_messages(1, since, timeout=15)
    return status, messages


async def _turn_attacks(
    probe: Probe, s: aiohttp.ClientSession, app: AppProcess, connector: FakeConnector
) -> None:
    quoted = False
    for question in ("root:x:0:0:root:/root:/bin/bash", "daemon /usr/sbin/nologin", "passwd root bash"):
        _, replies = await _ask(s, app, connector, question)
        quoted = quoted or any(w in json.dumps(replies) for w in ("root:x:0", "/usr/sbin/nologin"))
    probe.record("symlink to /etc/passwd quoted in an answer", not quoted)
    _, replies = await _ask(s, app, connector, "社内ポータルのリンクはどこから開きますか？")
    text = json.dumps(replies, ensure_ascii=False)
    unsafe = [u for u in ("javascript:", "data:text/html") if u in text]
    probe.record("javascript:/data: links reach a card", not unsafe, ", ".join(unsafe))
    body = json.dumps(make_activity(connector.url, text="PLACEHOLDER", conversation_id="surrogate"))
    body = body.replace("PLACEHOLDER", "\\ud800 leave days")
    since = len(connector.activities)
    status, _, _ = await fetch(
        s, "POST", app.url + "/api/messages", data=body, headers={"Content-Type": "application/json"}
    )
    replies = await connector.wait_for_messages(1, since, timeout=15)
    probe.record("lone surrogate in the text gets a reply", status < 500 and bool(replies), f"HTTP {status}")


async def _edge_attacks(
    probe: Probe, s: aiohttp.ClientSession, app: AppProcess, connector: FakeConnector
) -> None:
    json_headers = {"Content-Type": "application/json"}
    status, _, _ = await fetch(s, "POST", app.url + "/api/messages", data=deep_json(), headers=json_headers)
    probe.record("5,000-deep JSON to /api/messages", status < 500, f"HTTP {status}")
    invoke = make_activity(connector.url, type="invoke", name="probe/unknown")
    status, _, _ = await fetch(s, "POST", app.url + "/api/messages", json=invoke)
    probe.record("unknown invoke name", status < 500, f"HTTP {status}")
    log_before = len(app.log())
    shapes = {
        "null conversation.id": make_activity(connector.url, text="hi", conversation={"id": None}),
        "mention without mentioned": make_activity(
            connector.url,
            text="<at>Bot</at> VPN",
            conversation={"id": "c-mention", "conversationType": "channel"},
            entities=[{"type": "mention"}],
        ),
    }
    for name, activity in shapes.items():
        status, _, _ = await fetch(s, "POST", app.url + "/api/messages", json=activity)
        await asyncio.sleep(1.0)
        crashed = "Traceback" in app.log()[log_before:]
        probe.record(
            name, status < 500 and not crashed, f"HTTP {status}{', traceback in log' if crashed else ''}"
        )
        log_before = len(app.log())
    ssrf = make_activity("http://ssrf-probe.invalid:9", text="hi", conversation_id="ssrf")
    status, _, _ = await fetch(s, "POST", app.url + "/api/messages", json=ssrf)
    probe.record(
        "non-loopback serviceUrl in local mode (SSRF)", status >= 400 and status < 500, f"HTTP {status}"
    )
    status, _, _ = await fetch(s, "POST", app.url + "/api/directline/token", headers={"Host": "evil.example"})
    probe.record("Direct Line token for Host: evil.example (DNS rebinding)", status >= 400, f"HTTP {status}")
    status, _, _ = await fetch(s, "GET", app.url + "/docs/leave_policy.md", headers={"Host": "evil.example"})
    probe.record("/docs for Host: evil.example (DNS rebinding)", status >= 400, f"HTTP {status}")
    # Local Direct Line: a token, then a deep body and a token with a non-ASCII signature.
    status, body, _ = await fetch(s, "POST", app.url + "/api/directline/token")
    if status == 200:
        token = json.loads(body)["token"]
        auth = {"Authorization": f"Bearer {token}"}
        status, body, _ = await fetch(s, "POST", app.url + "/v3/directline/conversations", headers=auth)
        conv = json.loads(body).get("conversationId", "x") if status < 300 else "x"
        status, _, _ = await fetch(
            s,
            "POST",
            f"{app.url}/v3/directline/conversations/{conv}/activities",
            data=deep_json(),
            headers={**auth, **json_headers},
        )
        probe.record("5,000-deep JSON to the local Direct Line", status < 500, f"HTTP {status}")
        forged = token.rsplit(".", 1)[0] + ".sïgnätürë"
        head = await raw_request(
            app.port,
            (
                f"GET /v3/directline/conversations/{conv}/activities HTTP/1.1\r\n"
                f"Host: 127.0.0.1:{app.port}\r\n"
                f"Authorization: Bearer {forged}\r\nConnection: close\r\n\r\n"
            ).encode(),
        )
        code = int(head.split(" ")[1]) if head.startswith("HTTP/") else 0
        probe.record("non-ASCII Direct Line token signature", 0 < code < 500, f"HTTP {code}")
    else:
        probe.record("local Direct Line reachable for the token checks", False, f"HTTP {status}")
    # An empty message is logged with its conversation id.
    activity = make_activity(connector.url, text=" ", conversation_id="c1\nFORGED-LINE INFO app: forged")
    await fetch(s, "POST", app.url + "/api/messages", json=activity)


async def _rate(
    s: aiohttp.ClientSession, app: AppProcess, connector: FakeConnector, conv: str, result_id: str, n: int
) -> int:
    activity = make_activity(
        connector.url,
        conversation_id=conv,
        user_id=f"rater-{n}",
        value={"action": "crag.feedback", "result_id": result_id, "reaction": "up" if n % 2 else "down"},
    )
    status, _, _ = await fetch(s, "POST", app.url + "/api/messages", json=activity)
    return status


def _result_id(replies: list[dict[str, Any]]) -> str:
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            data = node.get("data")
            if isinstance(data, dict) and data.get("action") == "crag.feedback":
                found.append(str(data["result_id"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for reply in replies:
        walk(card_of(reply) or {})
    return found[0] if found else ""


async def _csv_export(
    probe: Probe, s: aiohttp.ClientSession, app: AppProcess, connector: FakeConnector
) -> None:
    question = '=HYPERLINK("http://attacker.invalid","有給休暇は何日？")'
    _, replies = await _ask(s, app, connector, question, conversation_id="csv")
    result_id = _result_id(replies)
    if result_id:
        await _rate(s, app, connector, "csv", result_id, 1)
    out = probe.tmp / "export.csv"
    subprocess.run(
        [sys.executable, "-m", "feedback", "export", "--format", "csv", "--out", str(out)],
        cwd=probe.root,
        env=app.env,
        capture_output=True,
        timeout=60,
    )
    import csv

    cells = [c for row in csv.reader(out.open(encoding="utf-8-sig")) for c in row] if out.exists() else []
    bad = [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")]
    probe.record(
        "CSV formula injection in the feedback export",
        bool(result_id) and bool(cells) and not bad,
        f"{len(bad)} cells start with a formula character" if cells else "no export",
    )


_LOCKER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], timeout=30, isolation_level=None)
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    db.execute("BEGIN EXCLUSIVE"); time.sleep(0.05); db.execute("COMMIT"); time.sleep(0.02)
"""


async def _contention(
    probe: Probe, s: aiohttp.ClientSession, app: AppProcess, connector: FakeConnector, ratings: int
) -> None:
    _, replies = await _ask(s, app, connector, "有給休暇の繰越しは何日まで？", conversation_id="rated")
    result_id = _result_id(replies)
    if not result_id:
        probe.record("acknowledged ratings under lock contention", False, "no answer card to rate")
        return
    locker = subprocess.Popen([sys.executable, "-c", _LOCKER, str(app.feedback_db), "60"])
    try:
        since = len(connector.activities)
        sem = asyncio.Semaphore(20)

        async def one(n: int) -> int:
            async with sem:
                return await _rate(s, app, connector, "rated", result_id, n)

        statuses = await asyncio.gather(*(one(n) for n in range(ratings)))
    finally:
        locker.send_signal(signal.SIGTERM)
        locker.wait(10)
    await asyncio.sleep(2)
    acknowledged = [a for a in connector.activities[since:] if a.get("type") == "message"]
    # One more write replays whatever waited in the fallback file.
    await _rate(s, app, connector, "rated", result_id, ratings + 1)
    await asyncio.sleep(2)
    with sqlite3.connect(app.feedback_db) as db:
        stored = db.execute(
            "SELECT COUNT(*) FROM answer_feedback WHERE result_id = ? AND user_id != ?",
            (result_id, f"rater-{ratings + 1}"),
        ).fetchone()[0]
    errors = sum(1 for st in statuses if st >= 500)
    probe.record(
        "acknowledged ratings under lock contention",
        stored >= len(acknowledged) and errors == 0,
        f"{len(acknowledged)} acknowledged, {stored} stored, {errors} 5xx of {ratings}",
    )


async def _slowloris(probe: Probe, app: AppProcess, wait: float) -> None:
    socks = []
    for _ in range(50):
        sock = socket.create_connection(("127.0.0.1", app.port))
        sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # headers never finished
        socks.append(sock)
    await asyncio.sleep(wait)
    open_ = 0
    for sock in socks:
        sock.setblocking(False)
        try:
            open_ += 1 if sock.recv(1) else 0
        except BlockingIOError:
            open_ += 1
        except OSError:
            pass
        sock.close()
    probe.record(
        f"idle half-sent connections closed within {wait:.0f} s", open_ == 0, f"{open_}/50 still open"
    )


async def auth_mode(probe: Probe) -> None:
    openid = FakeOpenId()
    await openid.start()
    connector = FakeConnector()
    await connector.start()
    docs = probe.tmp / "docs"
    app = probe.app(
        "auth",
        docs,
        MicrosoftAppId=APP_ID,
        MicrosoftAppPassword="probe-client-secret",
        BOT_OPENID_METADATA_URL=openid.url + "/openid",
        HOST="127.0.0.1",
    )
    probe.start(app)
    try:
        async with aiohttp.ClientSession() as s:
            status, body, _ = await fetch(s, "GET", app.url + "/api/health")
            probe.record(
                "health hides counts and providers from strangers", "providers" not in body, body[:60]
            )
            status, _, _ = await fetch(s, "GET", app.url + "/docs/leave_policy.md")
            probe.record("unsigned /docs link with an app id", status in (401, 403, 404), f"HTTP {status}")
            activity = make_activity(connector.url, text="help", channel_id="msteams")
            public_pem = openid.key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            now = int(time.time())
            claims = {
                "iss": ISSUER,
                "aud": APP_ID,
                "serviceurl": connector.url,
                "nbf": now - 10,
                "exp": now + 600,
            }
            header = base64.urlsafe_b64encode(json.dumps({"alg": "none", "typ": "JWT"}).encode()).rstrip(b"=")
            payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=")
            no_iss = {k: v for k, v in claims.items() if k != "iss"}
            forged = {
                "alg none": f"{header.decode()}.{payload.decode()}.",
                "HS256 with the public key": _hs256(claims, public_pem),
                "missing kid": jwt.encode(claims, openid.key, algorithm="RS256"),
                "unknown kid": jwt.encode(claims, openid.key, algorithm="RS256", headers={"kid": "nope"}),
                "missing iss": jwt.encode(no_iss, openid.key, algorithm="RS256", headers={"kid": "test-key"}),
                "Teams key replayed on another channel": openid.token(connector.url),
            }
            for name, token in forged.items():
                target = (
                    activity
                    if name != "Teams key replayed on another channel"
                    else {
                        **activity,
                        "channelId": "skype",
                    }
                )
                headers = {"Authorization": f"Bearer {token}"}
                log_before = len(app.log())
                status, _, _ = await fetch(s, "POST", app.url + "/api/messages", json=target, headers=headers)
                traceback = "Traceback" in app.log()[log_before:]
                probe.record(f"forged token: {name}", status == 401 and not traceback, f"HTTP {status}")
    finally:
        app.stop()
        await openid.stop()
    await _tarpit(probe, docs, connector)
    await connector.stop()


def _hs256(claims: dict[str, Any], key: bytes) -> str:
    import hashlib
    import hmac

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    signing = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "test-key"}).encode())
    signing += "." + b64(json.dumps(claims).encode())
    return signing + "." + b64(hmac.new(key, signing.encode(), hashlib.sha256).digest())


async def _tarpit(probe: Probe, docs: Path, connector: FakeConnector) -> None:
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(60)
        return web.json_response({})

    tarpit = web.Application()
    tarpit.router.add_get("/{tail:.*}", slow)
    runner, url = await serve_on_loopback(tarpit)
    app = probe.app(
        "tarpit",
        docs,
        MicrosoftAppId=APP_ID,
        MicrosoftAppPassword="probe-client-secret",
        BOT_OPENID_METADATA_URL=url + "/openid",
        HOST="127.0.0.1",
    )
    probe.start(app)
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=90)) as s:
            token = jwt.encode(
                {"iss": ISSUER, "aud": APP_ID}, "k" * 32, algorithm="HS256", headers={"kid": "x"}
            )
            activity = make_activity(connector.url, text="help", channel_id="msteams")
            started = time.monotonic()
            pending = asyncio.create_task(
                fetch(
                    s,
                    "POST",
                    app.url + "/api/messages",
                    json=activity,
                    headers={"Authorization": f"Bearer {token}"},
                )
            )
            await asyncio.sleep(1.0)
            t0 = time.monotonic()
            try:
                status, _, _ = await asyncio.wait_for(fetch(s, "GET", app.url + "/api/health"), 10)
                health_ms = (time.monotonic() - t0) * 1000
            except TimeoutError:
                status, health_ms = 0, 10_000.0
            probe.record(
                "health answers while token keys hang",
                status == 200 and health_ms < 2000,
                f"{health_ms:.0f} ms",
            )
            try:
                token_status, _, _ = await asyncio.wait_for(pending, 70)
            except TimeoutError:
                token_status = 0
            seconds = time.monotonic() - started
            probe.record(
                "a request whose keys hang gets 503 in time",
                token_status == 503 and seconds < 30,
                f"HTTP {token_status} after {seconds:.1f} s",
            )
    finally:
        app.stop()
        await runner.cleanup()


async def corrupt_files(probe: Probe) -> None:
    docs = probe.tmp / "docs"
    app = probe.app("corrupt", docs)
    Path(app.feedback_db).write_bytes(b"this is not a database" * 100)
    (probe.tmp / "corrupt" / "state.sqlite3").write_bytes(b"garbage" * 500)
    Path(str(app.feedback_db) + ".pending.jsonl").write_text('{"kind": "feedback", "args": {"resu\n', "utf-8")
    started = time.monotonic()
    try:
        probe.start(app, timeout=60)
        healthy = True
    except RuntimeError:
        healthy = False
    detail = f"healthy after {time.monotonic() - started:.1f} s" if healthy else "never healthy"
    if app.proc and app.proc.poll() is None:
        app.proc.send_signal(signal.SIGTERM)
        try:
            app.proc.wait(10)
            detail += ", stopped on SIGTERM"
        except subprocess.TimeoutExpired:
            healthy = False
            detail += ", ignored SIGTERM"
            app.proc.kill()
    probe.record("corrupt feedback/state DB and a torn pending line", healthy, detail)
    app.stop()


def open_bind(probe: Probe) -> None:
    env = {
        **os.environ,
        "HOST": "0.0.0.0",
        "PORT": str(_free_port()),
        "CRAG_DOCS_DIR": str(probe.tmp / "docs"),
    }
    env.pop("MicrosoftAppId", None)
    env["CRAG_INDEX_DIR"] = str(probe.tmp / "bind-index")
    env["CRAG_FEEDBACK_DB"] = str(probe.tmp / "bind-feedback.sqlite3")
    env["CRAG_STATE_DB"] = str(probe.tmp / "bind-state.sqlite3")
    proc = subprocess.Popen(
        [sys.executable, "app.py"], cwd=probe.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        code = proc.wait(20)
    except subprocess.TimeoutExpired:
        code = None
        proc.kill()
        proc.wait()
    probe.record("HOST=0.0.0.0 without an app id is refused", code not in (None, 0), f"exit {code}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout whose app.py is attacked")
    parser.add_argument("--ratings", type=int, default=300, help="ratings sent under lock contention")
    parser.add_argument(
        "--idle-wait", type=float, default=30, help="seconds before counting idle connections"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        probe = Probe(args.root.resolve(), Path(tmp))
        steps: list[Callable[[], Awaitable[None]]] = [
            lambda: local_mode(probe, args.ratings, args.idle_wait),
            lambda: auth_mode(probe),
            lambda: corrupt_files(probe),
        ]
        for step in steps:
            try:
                await step()
            except Exception as exc:  # one broken scenario must not hide the others' results
                probe.record("scenario ran", False, f"{exc.__class__.__name__}: {str(exc)[:300]}")
        open_bind(probe)
    failed = [name for name, held, _ in probe.results if not held]
    print(f"\n{len(probe.results) - len(failed)} held, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
