"""The local Direct Line: conversations, tokens and bot turns, without HTTP (see directline_api.py).

A user activity is stored first (the echo Web Chat waits for), then handed to the bot in a turn of
its own; the bot's replies come back through the connector routes and are stored after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Callable, Coroutine
from typing import Any

from webchat.activities import BOT_ID, account, bot_activity, members_added, user_activity
from webchat.bridge import BotBridge
from webchat.conversations import Conversation, ConversationStore
from webchat.errors import ApiError, too_many_requests
from webchat.ids import new_conversation_id, new_user_id
from webchat.limits import LocalLimits
from webchat.ratelimit import RateLimiter
from webchat.tokens import TokenClaims, TokenError, TokenExpired, TokenIssuer

log = logging.getLogger(__name__)


class LocalDirectLine:
    def __init__(
        self,
        bridge: BotBridge,
        bot_name: str,
        limits: LocalLimits | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.limits = limits or LocalLimits()
        self.store = ConversationStore(self.limits, monotonic)
        self.tokens = TokenIssuer(self.limits.token_ttl_seconds, wall_clock)
        self.limiter = RateLimiter(self.limits.requests_per_second, self.limits.request_burst, monotonic)
        # Part of the serviceUrl the bot replies to: only this process knows it, so a browser cannot
        # post into a conversation as the bot.
        self.connector_key = secrets.token_urlsafe(24)
        self.bot = account(BOT_ID, bot_name, "bot")
        self._bridge = bridge
        self._tasks: set[asyncio.Task[None]] = set()

    def issue_token(self) -> dict[str, Any]:
        """A token for a new user in a new conversation (started on the client's POST /conversations)."""
        conversation_id, user_id = new_conversation_id(), new_user_id()
        token, expires_in = self.tokens.issue(conversation_id, user_id)
        return {
            "token": token,
            "conversationId": conversation_id,
            "expires_in": expires_in,
            "userId": user_id,
        }

    def authorize(self, authorization: str | None, conversation_id: str | None = None) -> TokenClaims:
        """The claims of the request's bearer token: 401 without a valid one, 403 when expired or for
        another conversation, 429 past the conversation's request rate."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(401, "Unauthorized", "send 'Authorization: Bearer <token>'")
        try:
            claims = self.tokens.verify(token.strip())
        except TokenExpired:
            raise ApiError(403, "TokenExpired", "the token has expired; get a new one") from None
        except TokenError:
            raise ApiError(401, "Unauthorized", "invalid token") from None
        if conversation_id is not None and conversation_id != claims.conversation_id:
            raise ApiError(403, "Forbidden", "this token is not for this conversation")
        wait = self.limiter.acquire(claims.conversation_id)
        if wait:
            raise too_many_requests(wait)
        return claims

    def refresh(self, claims: TokenClaims) -> dict[str, Any]:
        token, expires_in = self.tokens.issue(claims.conversation_id, claims.user_id)
        return {"conversationId": claims.conversation_id, "token": token, "expires_in": expires_in}

    async def start(
        self, claims: TokenClaims, client: str, service_url: str, locale: str = ""
    ) -> tuple[Conversation, bool]:
        conversation, created = self.store.start(claims.conversation_id, claims.user_id, client)
        if created:
            # The bot's welcome, as on other channels. Waiting for it (briefly) keeps it first in the
            # conversation even when the user's first message follows at once.
            update = members_added(conversation.id, claims.user_id, self.bot, locale)
            task = self._spawn(self._turn(conversation, update, service_url))
            await asyncio.wait({task}, timeout=self.limits.turn_wait_seconds)
        return conversation, created

    def conversation(self, claims: TokenClaims) -> Conversation:
        conversation = self.store.get(claims.conversation_id)
        if conversation is None or conversation.user_id != claims.user_id:
            raise ApiError(404, "ConversationNotFound", "conversation not found or expired; start a new one")
        return conversation

    async def post(self, claims: TokenClaims, body: Any, service_url: str) -> str:
        """Store a user's activity, run the bot's turn on it, and return its id.

        Waits for the turn (up to `turn_wait_seconds`) so that, as with Direct Line, the POST answers
        once the bot has replied; a slow turn goes on in the background.
        """
        conversation = self.conversation(claims)
        activity = user_activity(body, conversation.id, claims.user_id, self.bot)
        try:
            self._bridge.check(activity)
        except ValueError as exc:
            raise ApiError(400, "BadArgument", f"not a valid activity: {exc}") from None
        if activity["type"] == "typing":
            # Shown to nobody here (one user per conversation) and of no use to the bot.
            return ""
        activity_id = self.store.append(conversation, activity, from_bot=False)
        self.store.touch(conversation)
        task = self._spawn(self._turn(conversation, dict(activity), service_url))
        await asyncio.wait({task}, timeout=self.limits.turn_wait_seconds)
        return activity_id

    def receive_reply(self, conversation_id: str, body: Any) -> str:
        """A bot reply posted to the connector routes: stored for the client's next poll."""
        conversation = self.store.get(conversation_id)
        if conversation is None:
            raise ApiError(404, "ConversationNotFound", "conversation not found or expired")
        activity = bot_activity(body, conversation.id, conversation.user_id, self.bot)
        return self.store.append(conversation, activity, from_bot=True)

    def sweep(self) -> int:
        removed = self.store.sweep()
        if removed:
            log.info("forgot %d idle Web Chat conversation(s), %d open", removed, len(self.store))
        return removed

    async def wait_idle(self, timeout: float) -> bool:
        """Wait for the bot turns in flight; False if some are still running after `timeout`."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)
        return not self._tasks

    async def close(self, grace_seconds: float = 5.0) -> None:
        # Give running turns a moment to end on their own: the bot's connector client sends from
        # worker threads, which cancelling the task does not stop.
        if not await self.wait_idle(grace_seconds):
            log.warning("stopping with %d bot turn(s) still running", len(self._tasks))
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _turn(self, conversation: Conversation, activity: dict[str, Any], service_url: str) -> None:
        async with conversation.turn_lock:
            await self._bridge.deliver(activity, service_url)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        # Keep a reference: the event loop holds tasks only weakly.
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task
