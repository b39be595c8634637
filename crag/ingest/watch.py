"""Watch the documents folder and call back once per burst of changes, never twice at once.

watchfiles (inotify, FSEvents or ReadDirectoryChangesW; polling with WATCHFILES_FORCE_POLLING for
network and container mounts) groups a burst for us: it hands over a batch once nothing has changed
for QUIET_MS, or after MAX_GROUP_MS of steady change (a long folder copy). It keeps collecting while
the callback runs, so what changed during a rebuild becomes the next batch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path

from watchfiles import Change, awatch

from crag.ingest.loaders import SUPPORTED_SUFFIXES

log = logging.getLogger(__name__)

QUIET_MS = 500  # a copy of many files arrives as one batch: a gap this long ends it
MAX_GROUP_MS = 5_000  # a longer copy is indexed in steps (each rebuild reads only what changed)

OnChange = Callable[[set[tuple[Change, str]]], Awaitable[object]]


def relevant(docs_dir: Path, also: Collection[Path] = ()) -> Callable[[Change, str], bool]:
    """Which events may change the index: not those of hidden files and folders, Office lock files
    (~$…), editor backups (…~) or unsupported formats. A path without a suffix passes: it may be a
    folder that was renamed or removed, whose files raise no events of their own. The files `also`
    names pass whatever their names (the access file, hidden in the folder or anywhere else)."""
    wanted = {str(p) for p in also}
    # Folders watched only for one of those files: nothing else in them concerns the index.
    elsewhere = {p.parent for p in also if not p.is_relative_to(docs_dir)}

    def keep(change: Change, path: str) -> bool:
        if path in wanted:
            return True
        if any(Path(path).is_relative_to(d) for d in elsewhere) and not Path(path).is_relative_to(docs_dir):
            return False
        try:
            parts = Path(path).relative_to(docs_dir).parts
        except ValueError:
            return True
        if not parts or any(part.startswith(".") for part in parts):
            return False
        name = parts[-1]
        if name.startswith("~$") or name.endswith("~"):
            return False
        suffix = Path(name).suffix.lower()
        return not suffix or suffix in SUPPORTED_SUFFIXES or Path(path).is_dir()

    return keep


async def watch_folder(
    docs_dir: Path, on_change: OnChange, stop: asyncio.Event, also: Collection[Path] = ()
) -> None:
    """Call `on_change` (awaited: one at a time) with each batch of relevant changes until `stop` is
    set, and once first, with an empty batch, as soon as the folder is watched: whatever changed
    before that (while the index was being opened) is caught up then, and nothing falls in between.
    `also`: files that count as part of the folder (the access file, which may live elsewhere: its
    own folder is watched then, since editors replace a file rather than write it in place).
    Raises what watchfiles raises when the folder cannot be watched (e.g. it is gone)."""
    folder = docs_dir.expanduser().absolute()
    extra = [p.expanduser().absolute() for p in also]
    outside = {p.parent for p in extra if not p.is_relative_to(folder) and p.parent.is_dir()}
    first = True
    async for changes in awatch(
        folder,
        *sorted(outside),
        watch_filter=relevant(folder, extra),
        debounce=MAX_GROUP_MS,
        step=QUIET_MS,
        stop_event=stop,
        rust_timeout=1_000,
        yield_on_timeout=True,  # an empty batch each quiet second: the first says the watch is on
    ):
        if changes or first:
            first = False
            await on_change(changes)
