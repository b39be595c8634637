"""The bot's web app, wiring only: Bot Framework messages, health, the local documents the cards link
to, the Web Chat page and the admin dashboard, served after the checks of hosting/startup_checks.py.

python app.py                # builds or loads the local index, then serves on HOST:PORT
python app.py --workers 2    # the same port served by two processes (hosting/workers.py)
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from pathlib import Path
from urllib.parse import urlsplit

import redis.asyncio as aioredis
from aiohttp import web
from aiohttp.typedefs import Middleware
from botbuilder.core import ConversationState, Storage, UserState

from admin import AdminRoutes
from bot.bot_runtime import BotRuntime
from bot.channel.adapter import BotAdapter
from bot.channel.connector_cache import CachingAuthentication
from bot.channel.messages_route import MessagesRoute
from bot.crag_bot import CragBot, on_turn_error
from bot.state.storage import SqliteStorage, make_storage, quarantined_files
from crag.outbound.redis_connect import close_client
from feedback.protocol import FeedbackStoreError
from hosting import client_address, redact, startup_checks
from hosting.app_settings import BotSettings
from hosting.documents_route import DocumentRoute
from hosting.health_route import HealthRoute
from hosting.internal_errors import internal_errors
from hosting.shared_limits import limits_client
from hosting.workers import WORKER_ID, is_worker, pin_this_worker, supervise
from webchat import setup_webchat
from webchat.hosts import HostCheck

log = logging.getLogger("app")

MAX_BODY_BYTES = 1024 * 1024
RUNTIME = web.AppKey("runtime", BotRuntime)
STORAGE = web.AppKey("storage", Storage)
AUTHENTICATION = web.AppKey("authentication", CachingAuthentication)
INDEX_TASK: web.AppKey[asyncio.Task[None]] = web.AppKey("index_task")
LIMITS_REDIS: web.AppKey[aioredis.Redis] = web.AppKey("limits_redis")


def create_app(settings: BotSettings) -> web.Application:
    runtime = BotRuntime(settings)
    authentication = CachingAuthentication(settings.bot_framework_config(), settings.auth_timeout)
    adapter = BotAdapter(authentication)
    adapter.on_turn_error = on_turn_error
    storage = make_storage(settings)
    bot = CragBot(runtime, ConversationState(storage), UserState(storage))

    middlewares: list[Middleware] = [client_address.middleware(settings.proxy_networks), internal_errors]
    if not settings.app_id or settings.allowed_hosts:
        # Against DNS rebinding: the unauthenticated local mode answers only names that are its own.
        hosts = HostCheck([*settings.allowed_hosts.split(","), urlsplit(settings.base_url).netloc])
        middlewares.insert(0, hosts.middleware())
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=middlewares)
    app[RUNTIME] = runtime
    app[STORAGE] = storage
    app[AUTHENTICATION] = authentication
    app.router.add_post("/api/messages", MessagesRoute(settings, adapter, bot).post)
    health = HealthRoute(settings, runtime.status, lambda: runtime.quarantined + quarantined_files(storage))
    app.router.add_get("/api/health", health.get)
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
    await app[RUNTIME].start()
    if isinstance(storage := app[STORAGE], SqliteStorage):
        await storage.open()
    # The server answers at once; messages get a "still indexing" reply until the index is ready.
    app[INDEX_TASK] = asyncio.create_task(app[RUNTIME].load_index())


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


def main() -> None:
    parser = argparse.ArgumentParser(description="The CRAG bot: Bot Framework messages, /chat and health.")
    workers_help = "processes serving the port together (CRAG_WORKERS; default 1)"
    parser.add_argument("--workers", type=int, metavar="N", help=workers_help)
    args = parser.parse_args()
    worker = f" w{os.environ[WORKER_ID]}" if is_worker() else ""
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s %(levelname)s{worker} %(name)s: %(message)s")
    pin_this_worker()  # before any thread starts: they inherit the core
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    settings = startup_checks.read_settings(args.workers)
    startup_checks.refuse_to_start_wrongly(settings)
    redact.install(redact.secret_values(settings))
    if settings.workers > 1 and not is_worker():
        raise SystemExit(supervise(settings, settings.workers))
    _say_what_to_open(settings)
    with startup_checks.invalid_settings(ValueError):  # a storage or provider setting that cannot work
        app = create_app(settings)
    # aiohttp closes a connection that has not sent a whole request (headers) within keepalive_timeout
    # of connecting or of its previous answer: idle and byte-by-byte (slowloris) clients alike. A
    # FeedbackStoreError: the database answered but refused the store, a setting to fix.
    with startup_checks.says_port_in_use(settings), startup_checks.invalid_settings(FeedbackStoreError):
        web.run_app(
            app,
            host=settings.bind_host,
            port=settings.port,
            print=None,
            keepalive_timeout=settings.http_client_timeout,
            reuse_port=is_worker() or None,  # workers share the port; the kernel spreads connections
        )


def _say_what_to_open(settings: BotSettings) -> None:
    auth = "on" if settings.app_id else "off (Emulator / local)"
    log.info("starting on http://%s:%d/api/messages, auth %s", settings.bind_host, settings.port, auth)
    # What to open: the Emulator's endpoint, the Web Chat page, the health check.
    base = settings.base_url
    log.info("open %s/chat (Web Chat) · Emulator: %s/api/messages · health: %s/api/health", base, base, base)
    log.info("documents: %s", Path(settings.docs_dir).resolve())


if __name__ == "__main__":
    main()
