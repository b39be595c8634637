"""Who a reader is: a user's principals from a MembershipSource (crag/core/access.py), failing closed.

`reader_for` makes the reader of a user: their own id, their groups and EVERYONE. When the source
fails (Graph down, throttled, a broken file) the user keeps only their own id and EVERYONE: they
read less for a while, never more. `CachedMembership` keeps a remote source's answers for a TTL (a
Graph call per question would be slow and throttled). `LocalMembership` reads the [groups] of the
access file (crag/access/files.py) and follows its edits at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from crag.access.files import AccessFile, AccessFileError, read_access_file
from crag.core.access import MembershipSource, Reader, normalize, reader_of

log = logging.getLogger(__name__)


async def reader_for(user_id: str | None, source: MembershipSource | None) -> Reader:
    """The reader of a user (only EVERYONE for no user, the user and EVERYONE without a source)."""
    if not user_id:
        return reader_of(None)
    if source is None:
        return reader_of(user_id)
    try:
        groups = await source.groups_of(user_id)
    except Exception as exc:  # whatever the source raises: the turn goes on with less
        log.warning(
            "groups of user %r unavailable from %s (%s); answering from documents shared with "
            "the user or with everyone only",
            user_id[:80],
            source.name,
            exc.__class__.__name__,
        )
        return reader_of(user_id)
    return reader_of(user_id, groups)


class CachedMembership:
    """A MembershipSource's answers, kept per user for `ttl_s` seconds (at most `max_users`).
    Concurrent questions of one user wait for one lookup. Failures are not kept: the next question
    asks again."""

    def __init__(
        self,
        source: MembershipSource,
        ttl_s: float,
        max_users: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.name = f"{source.name} (cached {ttl_s:g}s)"
        self._ttl = ttl_s
        self._max = max_users
        self._clock = clock
        self._groups: OrderedDict[str, tuple[float, tuple[str, ...]]] = OrderedDict()
        self._pending: dict[str, asyncio.Task[tuple[str, ...]]] = {}

    async def close(self) -> None:
        """Close the source when it holds connections (Graph); a local mapping holds none."""
        close = getattr(self.source, "close", None)
        if close is not None:
            await close()

    async def groups_of(self, user_id: str) -> tuple[str, ...]:
        key = user_id.strip().lower()
        entry = self._groups.get(key)
        if entry is not None and self._clock() - entry[0] < self._ttl:
            self._groups.move_to_end(key)
            return entry[1]
        task = self._pending.get(key)
        if task is None:
            task = asyncio.ensure_future(self._lookup(key))
            self._pending[key] = task
            task.add_done_callback(lambda _: self._pending.pop(key, None))
        return await asyncio.shield(task)

    async def _lookup(self, key: str) -> tuple[str, ...]:
        groups = normalize(await self.source.groups_of(key))
        self._groups[key] = (self._clock(), groups)
        self._groups.move_to_end(key)
        while len(self._groups) > self._max:
            self._groups.popitem(last=False)
        return groups

    def forget(self) -> None:
        """Drop every kept answer (the next question of each user asks the source again)."""
        self._groups.clear()


class LocalMembership:
    """The [groups] of an access file: no Graph needed. The file is read again when it changes (a
    stat per lookup), so removing a user from a group takes effect on their next question. A file
    that breaks keeps the last groups read (as the index keeps the last rules) and says so once."""

    name = "access-file groups"

    def __init__(self, path: Path, required: bool = False) -> None:
        self.path = path
        self._required = required
        self._stamp: tuple[int, int, int] | None = None
        self._file = AccessFile()
        self._broken: tuple[int, int, int] | None = None

    async def groups_of(self, user_id: str) -> tuple[str, ...]:
        return self._current().groups_of(user_id)

    def _current(self) -> AccessFile:
        try:
            st = os.stat(self.path)
            stamp: tuple[int, int, int] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except FileNotFoundError:
            stamp = None
        if stamp == self._stamp or stamp == self._broken:
            return self._file
        try:
            self._file = read_access_file(self.path, self._required)
        except AccessFileError as exc:
            self._broken = stamp
            log.error("%s; the groups read before stay in force until it is fixed", exc)
            return self._file
        self._stamp, self._broken = stamp, None
        return self._file
