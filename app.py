"""The bot's web app: Bot Framework messages, health, the local documents the cards link to, the Web
Chat page and the admin dashboard.

python app.py                # builds or loads the local index, then serves on HOST:PORT
python app.py --workers 2    # the same port served by two processes (hosting/workers.py)
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import hmac
import json
import logging
import os
import re
import sys
from pathlib import Path
from urllib.parse import urlsplit

import jwt
import redis.asyncio as aioredis
from aiohttp import web
from aiohttp.typedefs import Middleware
from botbuilder.core import ConversationState, Storage, TurnContext, UserState
from botbuilder.integration.aiohttp import CloudAdapter
from botbuilder.schema import Activity, ActivityTypes
from msrest.exceptions import DeserializationError  # type: ignore[attr-defined]  # msrest re-exports azure-core's

from admin import AdminRoutes
from bot.bot_runtime import BotRuntime
from bot.channel.adapter import BotAdapter
from bot.channel.auth import AuthUnavailable
from bot.channel.connector_cache import CachingAuthentication
from bot.crag_bot import REPLIED, CragBot
from bot.state.storage import SqliteStorage, make_storage
from crag.outbound.redis_connect import close_client
from crag.runtime.handle import uses_local_index
from feedback.protocol import FeedbackStoreError
from hosting import client_address, redact
from hosting.app_settings import BotSettings
from hosting.documents_route import DocumentRoute
from hosting.logsafe import esc
from hosting.shared_limits import limits_client
from hosting.ui_texts import language_of, t
from hosting.workers import WORKER_ID, is_worker, pin_this_worker, supervise
from hosting.writable import unwritable
from webchat import setup_webchat
from webchat.hosts import HostCheck, is_loopback_host, is_loopback_url
from webchat.jsonbody import loads as load_json

log = logging.getLogger("app")

MAX_BODY_BYTES = 1024 * 1024
_BEARER_JWT = re.compile(r"^Bearer [A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$")
# Channels' conversation ids are printable ASCII; the SDK sends the id in a header, which refuses others.
_CONVERSATION_ID = re.compile(r"^[\x21-\x7e]+$")
RUNTIME = web.AppKey("runtime", BotRuntime)
ADAPTER = web.AppKey("adapter", CloudAdapter)
BOT = web.AppKey("bot", CragBot)
STORAGE = web.AppKey("storage", Storage)
AUTHENTICATION = web.AppKey("authentication", CachingAuthentication)
INDEX_TASK: web.AppKey[asyncio.Task[None]] = web.AppKey("index_task")
LIMITS_REDIS: web.AppKey[aioredis.Redis] = web.AppKey("limits_redis")


def create_app(settings: BotSettings) -> web.Application:
    runtime = BotRuntime(settings)
    authentication = CachingAuthentication(settings.bot_framework_config(), settings.auth_timeout)
    adapter = BotAdapter(authentication)
    adapter.on_turn_error = _on_turn_error
    storage = make_storage(settings)
    conversation_state = ConversationState(storage)
    user_state = UserState(storage)
    bot = CragBot(runtime, conversation_state, user_state)

    middlewares: list[Middleware] = [client_address.middleware(settings.proxy_networks), _error_middleware]
    if not settings.app_id or settings.allowed_hosts:
        # Against DNS rebinding: the unauthenticated local mode answers only names that are its own.
        hosts = HostCheck([*settings.allowed_hosts.split(","), urlsplit(settings.base_url).netloc])
        middlewares.insert(0, hosts.middleware())
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=middlewares)
    app[RUNTIME] = runtime
    app[ADAPTER] = adapter
    app[BOT] = bot
    app[STORAGE] = storage
    app[AUTHENTICATION] = authentication
    app.router.add_post("/api/messages", messages)
    app.router.add_get("/api/health", health)
    DocumentRoute(settings.docs_dir, lambda: runtime.index.files, runtime.links, runtime.may_open).register(
        app
    )
    # Rate limits and the admin lockout, shared by every replica through Redis when there is one.
    shared = limits_client(settings)
    if shared is not None:
        app[LIMITS_REDIS] = shared
    AdminRoutes(settings, runtime.feedback, runtime.handle, shared=shared).register(app)
    setup_webchat(app, settings, adapter, bot.on_turn, shared=shared)
    app.on_startup.append(_startup)
    app.on_cleanup.append(_cleanup)
    return app


async def _startup(app: web.Application) -> None:
    runtime = app[RUNTIME]
    await runtime.start()
    storage = app[STORAGE]
    if isinstance(storage, SqliteStorage):
        await storage.open()
    # The server answers at once; messages get a "still indexing" reply until the index is ready.
    app[INDEX_TASK] = asyncio.create_task(runtime.load_index())


async def _cleanup(app: web.Application) -> None:
    task = app[INDEX_TASK]
    if not task.done():
        task.cancel()
    await app[RUNTIME].close()
    await app[AUTHENTICATION].close()  # the session replies are posted over
    if LIMITS_REDIS in app:
        await close_client(app[LIMITS_REDIS])
    # SQLite's file and Blob's HTTP session; the SDK's Storage has no close (MemoryStorage, Cosmos).
    close = getattr(app[STORAGE], "close", None)
    if close is not None:
        await close()


async def _on_turn_error(context: TurnContext, error: Exception) -> None:
    # Log the details; the user gets a polite sentence, never a stack trace.
    activity = context.activity
    log.error("unhandled error in turn %s of %s", esc(activity.id), esc(activity.channel_id), exc_info=error)
    # Every message gets an answer: a typing indicator or a stream's progress alone is none.
    if activity.type == ActivityTypes.message and not context.turn_state.get(REPLIED):
        try:
            await context.send_activity(t("error", language_of(context.activity.locale)))
        except Exception:
            log.exception("could not send the error message")


@web.middleware
async def _error_middleware(request: web.Request, handler):  # type: ignore[no-untyped-def]
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except Exception:
        log.exception("unhandled error serving %s %s", esc(request.method), esc(request.path))
        return web.json_response({"error": "internal error"}, status=500)


async def messages(request: web.Request) -> web.StreamResponse:
    # Answer client errors ourselves: botbuilder 4.17 turns several of them into 500s.
    settings = request.app[RUNTIME].settings
    if "application/json" not in request.headers.get("Content-Type", ""):
        return web.json_response({"error": "Content-Type must be application/json"}, status=415)
    try:
        async with asyncio.timeout(settings.http_client_timeout):  # a body sent byte by byte
            raw = await request.read()
        body = load_json(raw)  # nesting capped: parsed before authentication
    except web.HTTPRequestEntityTooLarge:
        return web.json_response({"error": "activity too large"}, status=413)
    except TimeoutError:
        return web.json_response({"error": "the body took too long to arrive"}, status=408)
    except ValueError:  # UnicodeDecodeError is one
        return web.json_response({"error": "body is not valid JSON (or nests too deeply)"}, status=400)
    if not isinstance(body, dict) or not isinstance(body.get("type"), str):
        return web.json_response({"error": "body is not an activity"}, status=400)
    if not isinstance(body.get("serviceUrl"), str) or not isinstance(body.get("conversation"), dict):
        return web.json_response({"error": "activity lacks serviceUrl or conversation"}, status=400)
    conversation_id = body["conversation"].get("id")
    if not isinstance(conversation_id, str) or not _CONVERSATION_ID.match(conversation_id):
        # The SDK needs it for state and replies (and a line break in it would forge log lines).
        return web.json_response({"error": "conversation.id must be a non-empty ASCII string"}, status=400)
    try:
        Activity().deserialize(body)
    except (DeserializationError, ValueError, TypeError, AttributeError):
        return web.json_response({"error": "body is not a valid activity"}, status=400)
    if not settings.app_id and not is_loopback_url(body["serviceUrl"]):
        # Unauthenticated, the bot would post its replies wherever a caller points it (SSRF).
        log.warning(
            "refused an activity for serviceUrl %s (local mode: loopback only)", esc(body["serviceUrl"])
        )
        return web.json_response(
            {"error": "without MicrosoftAppId the bot replies only to a loopback serviceUrl"}, status=403
        )
    if settings.app_id and not _BEARER_JWT.match(request.headers.get("Authorization", "")):
        # The SDK answers a malformed token with 500; a caller without a valid token gets 401.
        return web.json_response({"error": "a Bot Framework bearer token is required"}, status=401)
    try:
        response = await request.app[ADAPTER].process(request, request.app[BOT])
    except (PermissionError, jwt.PyJWTError, web.HTTPUnauthorized):
        return web.json_response({"error": "invalid bearer token"}, status=401)
    except AuthUnavailable:  # inbound signing keys, or the bot's own token for replying
        return web.json_response(
            {"error": "authentication services cannot be reached; try again later"},
            status=503,
            headers={"Retry-After": "30"},
        )
    return response or web.Response(status=201)


async def health(request: web.Request) -> web.Response:
    runtime = request.app[RUNTIME]
    status, payload = runtime.status()
    if not _may_see_health_details(request):
        # An internet-facing bot tells an anonymous caller whether it is up, not what it holds.
        return web.json_response({"status": payload["status"]}, status=status)
    # Damaged feedback / state files moved aside on this start: someone should look at them.
    storage = request.app[STORAGE]
    moved = runtime.quarantined + (storage.quarantined if isinstance(storage, SqliteStorage) else [])
    payload["quarantined_files"] = [Path(p).name for p in moved]
    return web.json_response(payload, status=status, dumps=lambda o: json.dumps(o, ensure_ascii=False))


def _may_see_health_details(request: web.Request) -> bool:
    settings = request.app[RUNTIME].settings
    if not settings.app_id:
        return True  # local mode: loopback only
    key = settings.health_key.get_secret_value()
    given = request.headers.get("X-Health-Key", "")
    return bool(key) and hmac.compare_digest(given.encode(), key.encode())


def main() -> None:
    parser = argparse.ArgumentParser(description="The CRAG bot: Bot Framework messages, /chat and health.")
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="processes serving the port together (CRAG_WORKERS; default 1)",
    )
    args = parser.parse_args()
    worker = f" w{os.environ[WORKER_ID]}" if is_worker() else ""
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s %(levelname)s{worker} %(name)s: %(message)s")
    pin_this_worker()  # before any thread starts: they inherit the core
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    try:
        settings = BotSettings()
        if args.workers is not None:
            if not 1 <= args.workers <= 64:
                raise ValueError(f"--workers must be between 1 and 64, not {args.workers}")
            settings = settings.model_copy(update={"workers": args.workers})
    except Exception as exc:  # pydantic's message names the bad setting
        print(f"invalid settings: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if settings.source == "folder" and not settings.docs_dir.is_dir() and uses_local_index(settings):
        print(f"documents folder not found: {settings.docs_dir} (set CRAG_DOCS_DIR)", file=sys.stderr)
        raise SystemExit(2)
    if not settings.app_id and not is_loopback_host(settings.bind_host):
        if not settings.allow_remote_unauthenticated:
            print(
                f"refusing to listen on {settings.bind_host} without MicrosoftAppId: anyone who can reach it "
                "could use the bot unauthenticated. Set MicrosoftAppId, or HOST=127.0.0.1, or "
                "CRAG_ALLOW_REMOTE_UNAUTHENTICATED=true if you really mean it.",
                file=sys.stderr,
            )
            raise SystemExit(2)
        log.warning(
            "listening on %s WITHOUT authentication (CRAG_ALLOW_REMOTE_UNAUTHENTICATED)", settings.bind_host
        )
    problem = unwritable(settings)
    if problem:
        print(problem, file=sys.stderr)
        raise SystemExit(2)
    redact.install(redact.secret_values(settings))
    if settings.workers > 1 and not is_worker():
        raise SystemExit(supervise(settings, settings.workers))
    auth = "on" if settings.app_id else "off (Emulator / local)"
    log.info("starting on http://%s:%d/api/messages, auth %s", settings.bind_host, settings.port, auth)
    # What to open: the Emulator's endpoint, the Web Chat page, the health check.
    base = settings.base_url
    log.info("open %s/chat (Web Chat) · Emulator: %s/api/messages · health: %s/api/health", base, base, base)
    log.info("documents: %s", Path(settings.docs_dir).resolve())
    try:
        app = create_app(settings)
    except ValueError as exc:  # a storage or provider setting that cannot work
        print(f"invalid settings: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    # aiohttp closes a connection that has not sent a whole request (headers) within keepalive_timeout
    # of connecting or of its previous answer: idle and byte-by-byte (slowloris) clients alike.
    try:
        web.run_app(
            app,
            host=settings.bind_host,
            port=settings.port,
            print=None,
            keepalive_timeout=settings.http_client_timeout,
            reuse_port=is_worker() or None,  # workers share the port; the kernel spreads connections
        )
    except FeedbackStoreError as exc:  # the database answered but refused the store: a setting to fix
        print(f"invalid settings: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        # Another bot (or anything else) listens there already: say so, not a traceback.
        log.error("port %d on %s is in use", settings.port, settings.bind_host)
        print(
            f"error: port {settings.port} on {settings.bind_host} is already in use "
            "(another bot running?); stop it or set PORT to another port",
            file=sys.stderr,
        )
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
