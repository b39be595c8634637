"""The local Direct Line's limits: it runs in the bot's process, so every resource it holds is capped."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LocalLimits:
    # Size of one activity a client posts (Direct Line itself refuses messages above about 256 KB;
    # a question is at most a few KB, so 32 KB leaves room for Web Chat's own fields).
    max_activity_bytes: int = 32 * 1024
    # Size of one activity the bot posts back (an answer card is kept under 28 KB).
    max_reply_bytes: int = 256 * 1024
    # Activities kept per conversation (user and bot together); the user is asked to start anew.
    max_activities: int = 200
    # Extra room for the bot, so the question that reaches the limit still gets its answer.
    reply_headroom: int = 20
    # Live conversations per client IP, and in all.
    max_conversations_per_client: int = 10
    max_conversations: int = 200
    # A conversation without a user message (or start) for this long is forgotten; polling does not
    # count, so a forgotten browser tab does not hold memory forever.
    idle_seconds: float = 30 * 60
    # Lifetime of a token; Web Chat refreshes it every 15 minutes through /tokens/refresh.
    token_ttl_seconds: int = 30 * 60
    # Requests per second per conversation (Web Chat polls once a second) and the burst allowed.
    requests_per_second: float = 5.0
    request_burst: int = 20
    # How long a POST of an activity waits for the bot's turn before answering with its id anyway.
    turn_wait_seconds: float = 15.0
    # How often expired conversations are swept out of memory.
    sweep_seconds: float = 60.0
