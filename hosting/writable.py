"""The folders the bot writes to, checked once at start: a folder it cannot create or write (a
container's /data volume owned by another user, a path through a file) is named with the setting
that places it, instead of failing later inside SQLite or the index build with a traceback."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from crag.runtime.handle import uses_local_index
from hosting.app_settings import BotSettings


def folders_written(settings: BotSettings) -> list[tuple[str, Path]]:
    """(setting, folder) for every folder this configuration writes to."""
    out: list[tuple[str, Path]] = []
    if uses_local_index(settings):
        out.append(("CRAG_INDEX_DIR", settings.index_dir))
    if settings.vector_cache_dir:
        out.append(("CRAG_VECTOR_CACHE", Path(settings.vector_cache_dir)))
    if settings.feedback_store == "sqlite":
        out.append(("CRAG_FEEDBACK_DB", settings.feedback_db.parent))
    if settings.state_storage == "sqlite":
        out.append(("CRAG_STATE_DB", settings.state_db.parent))
    return out


def unwritable(settings: BotSettings) -> str | None:
    """What cannot be written, said for the person starting the bot; None when every folder can."""
    for setting, folder in folders_written(settings):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            # A real write: os.access says yes to root on a read-only mount.
            with tempfile.TemporaryFile(dir=folder):
                pass
        except OSError as exc:
            who = f"uid {os.getuid()}" if hasattr(os, "getuid") else "this user"
            return (
                f"cannot write to {folder} ({setting}): {exc.strerror or exc}. The bot keeps its index, "
                f"vectors, conversation state and ratings there: make the folder writable by {who}, "
                f"or set {setting} to a folder that is."
            )
    return None
