"""setup_webchat(): the one call app.py makes to add the chat page, the token endpoint and, in the
unauthenticated local mode, the local Direct Line with its connector routes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import redis.asyncio as aioredis
from aiohttp import web

from hosting.app_settings import BotSettings
from hosting.examples import example_questions
from hosting.shared_limits import SharedRateLimit
from hosting.ui_texts import LANGS, t
from webchat.accesslog import quiet_access_log
from webchat.bridge import BotBridge, TurnLogic, TurnProcessor
from webchat.connector_api import PREFIX as CONNECTOR_PREFIX
from webchat.connector_api import connector_app
from webchat.cors import Cors
from webchat.directline_api import PREFIX as DIRECTLINE_PREFIX
from webchat.directline_api import directline_app
from webchat.limits import LocalLimits
from webchat.local_directline import LocalDirectLine
from webchat.page import DEFAULT_BUNDLE, ChatPage
from webchat.ratelimit import RateLimiter
from webchat.token_api import NEEDS_SECRET, TokenApi
from webchat.token_api import PATH as TOKEN_PATH
from webchat.token_exchange import DirectLineTokenClient

log = logging.getLogger(__name__)

LOCAL_DIRECTLINE = web.AppKey("webchat_local_directline", LocalDirectLine)
TOKEN_EXCHANGE = web.AppKey("webchat_token_exchange", DirectLineTokenClient)
SWEEPER: web.AppKey[asyncio.Task[None]] = web.AppKey("webchat_sweeper")

# Shown only on the bundled sample documents, which they are about.


def setup_webchat(
    app: web.Application,
    settings: BotSettings,
    adapter: TurnProcessor,
    logic: TurnLogic,
    *,
    limits: LocalLimits | None = None,
    bundle: Path = DEFAULT_BUNDLE,
    monotonic: Callable[[], float] = time.monotonic,
    shared: aioredis.Redis | None = None,
    wall_clock: Callable[[], float] = time.time,
) -> None:
    """Register GET /chat, POST /api/directline/token and (local mode) /v3/directline on `app`.

    `adapter` and `logic` are the app's CloudAdapter and the bot's on_turn: local Direct Line
    conversations run through the very same bot as /api/messages. The keyword arguments are for tests.
    """
    secret = settings.direct_line_secret.get_secret_value()
    cors = Cors.from_setting(settings.webchat_allowed_origins)
    exchange = DirectLineTokenClient(settings.direct_line_endpoint, secret) if secret else None
    local: LocalDirectLine | None = None
    not_configured = NEEDS_SECRET
    # The local Direct Line runs turns without authentication, so it exists only while the bot has
    # none (no app id): an authenticated bot uses Azure's Direct Line channel and its secret. It keeps
    # its conversations in this process's memory, so it also needs the one process: with several
    # workers a conversation's requests would land on processes that never heard of it.
    if not secret and not settings.app_id and settings.workers > 1:
        not_configured = (
            "the local Web Chat runs in a single process: start the bot with one worker (CRAG_WORKERS=1), "
            "or use the Emulator, Teams or Azure's Direct Line (DIRECT_LINE_SECRET)"
        )
        log.warning(
            "/chat: the local Direct Line is off with %d workers (%s)", settings.workers, not_configured
        )
    elif not secret and not settings.app_id:
        local = LocalDirectLine(BotBridge(adapter, logic), settings.bot_name, limits, monotonic, wall_clock)
        app.add_subapp(DIRECTLINE_PREFIX, directline_app(local, cors, settings.port))
        app.add_subapp(CONNECTOR_PREFIX, connector_app(local))
        app[LOCAL_DIRECTLINE] = local
        quiet_access_log()

    # The page may call the Direct Line its tokens name: Azure's, or this app under PUBLIC_BASE_URL.
    origins = tuple(_origin(u) for u in (settings.direct_line_endpoint, settings.public_base_url) if u)
    ChatPage(settings.bot_name, _page_config(settings), bundle, origins).register(app)
    per_second = settings.webchat_tokens_per_minute / 60
    # Per client across every replica when Redis is there (hosting/shared_limits.py), else per replica.
    memory = RateLimiter(per_second, burst=min(settings.webchat_tokens_per_minute, 5), clock=monotonic)
    limiter = SharedRateLimit("webchat-token", memory, shared)
    TokenApi(cors, limiter, exchange, local, settings.public_base_url, not_configured).register(app)
    if exchange is not None:
        app[TOKEN_EXCHANGE] = exchange
    app.on_startup.append(_start_sweeper)
    app.on_cleanup.append(_close)

    off = "off (one worker only)" if not secret and not settings.app_id else "off (set DIRECT_LINE_SECRET)"
    mode = "Azure Direct Line" if exchange else "local Direct Line" if local else off
    log.info("Web Chat at /chat, tokens at %s: %s", TOKEN_PATH, mode)


def _page_config(settings: BotSettings) -> dict[str, Any]:
    # The first example of each language, as chips under the chat (the same list as the welcome card).
    firsts = [
        questions[0]
        for lang in ("ja", "en")
        if (questions := example_questions(lang, settings.docs_dir, settings.welcome_examples))
    ]
    examples = list(dict.fromkeys(firsts))
    # The page's own texts, in both languages: the script picks the browser's.
    texts = {
        key: {lang: t(f"webchat.{key}", lang) for lang in LANGS} for key in ("hint", "start_failed", "me")
    }
    return {"tokenUrl": TOKEN_PATH, "texts": texts, "examples": examples}


def _origin(url: str) -> str:
    parsed = urlsplit(url)
    return f"{parsed.scheme}://{parsed.netloc}" if parsed.scheme and parsed.netloc else ""


async def _start_sweeper(app: web.Application) -> None:
    local = app.get(LOCAL_DIRECTLINE)
    if local is not None:
        app[SWEEPER] = asyncio.create_task(_sweep_forever(local))


async def _sweep_forever(local: LocalDirectLine) -> None:
    # Idle conversations are also dropped when touched; this frees the ones nobody comes back to.
    while True:
        await asyncio.sleep(local.limits.sweep_seconds)
        local.sweep()


async def _close(app: web.Application) -> None:
    sweeper = app.get(SWEEPER)
    if sweeper is not None:
        sweeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sweeper
    local = app.get(LOCAL_DIRECTLINE)
    if local is not None:
        await local.close()
    exchange = app.get(TOKEN_EXCHANGE)
    if exchange is not None:
        await exchange.close()
