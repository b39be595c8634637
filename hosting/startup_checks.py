"""What `python app.py` checks before it serves: the settings, the documents folder, listening
beyond loopback without an app id, the folders it writes, and the port. Each failure is one line on
stderr and an exit code (2: a setting to fix; 1: the port is taken), never a traceback."""

from __future__ import annotations

import errno
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

from crag.runtime.handle import uses_local_index
from hosting.app_settings import BotSettings
from hosting.loopback_addresses import is_loopback_host
from hosting.writable import unwritable

log = logging.getLogger(__name__)


@contextmanager
def invalid_settings(*errors: type[Exception]) -> Iterator[None]:
    """An error of these kinds raised inside is a setting to fix: its message, and exit 2."""
    try:
        yield
    except errors as exc:
        print(f"invalid settings: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def read_settings(workers: int | None) -> BotSettings:
    """The settings (environment and .env), with --workers N in place of CRAG_WORKERS."""
    with invalid_settings(Exception):  # pydantic's message names the bad setting
        settings = BotSettings()
        if workers is not None:
            if not 1 <= workers <= 64:
                raise ValueError(f"--workers must be between 1 and 64, not {workers}")
            settings = settings.model_copy(update={"workers": workers})
    return settings


def refuse_to_start_wrongly(settings: BotSettings) -> None:
    """Exit 2 before serving what cannot work (no documents, a folder it cannot write) or should not
    be served (the bot unauthenticated on an interface others reach)."""
    _documents_folder_exists(settings)
    _authenticated_or_loopback(settings)
    problem = unwritable(settings)
    if problem:
        _stop(problem)


def _documents_folder_exists(settings: BotSettings) -> None:
    if settings.source == "folder" and not settings.docs_dir.is_dir() and uses_local_index(settings):
        _stop(f"documents folder not found: {settings.docs_dir} (set CRAG_DOCS_DIR)")


def _authenticated_or_loopback(settings: BotSettings) -> None:
    if settings.app_id or is_loopback_host(settings.bind_host):
        return
    if not settings.allow_remote_unauthenticated:
        _stop(
            f"refusing to listen on {settings.bind_host} without MicrosoftAppId: anyone who can reach it "
            "could use the bot unauthenticated. Set MicrosoftAppId, or HOST=127.0.0.1, or "
            "CRAG_ALLOW_REMOTE_UNAUTHENTICATED=true if you really mean it."
        )
    log.warning(
        "listening on %s WITHOUT authentication (CRAG_ALLOW_REMOTE_UNAUTHENTICATED)", settings.bind_host
    )


def _stop(message: str) -> NoReturn:
    print(message, file=sys.stderr)
    raise SystemExit(2)


@contextmanager
def says_port_in_use(settings: BotSettings) -> Iterator[None]:
    """Another bot (or anything else) listening on the port already: one line and exit 1."""
    try:
        yield
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        log.error("port %d on %s is in use", settings.port, settings.bind_host)
        print(
            f"error: port {settings.port} on {settings.bind_host} is already in use "
            "(another bot running?); stop it or set PORT to another port",
            file=sys.stderr,
        )
        raise SystemExit(1) from None
