"""Random identifiers: Direct Line user ids and local conversation ids (unguessable, URL-safe)."""

from __future__ import annotations

import secrets


def new_user_id() -> str:
    # "dl_" marks a Direct Line user; Azure's token service requires that prefix for user ids.
    return "dl_" + secrets.token_hex(12)


def new_conversation_id() -> str:
    # The conversation id is part of every URL and of activity ids ("<id>|0000001"): URL-safe, no "|".
    return secrets.token_urlsafe(18)
