"""The fallback file of feedback writes a database refused: what makes "acknowledged" mean "kept".

When the database cannot take a write (SQLite locked by another process or its disk in trouble,
PostgreSQL down or refusing connections), the store appends the item to `<name>.pending.jsonl` and
fsyncs it before it answers the caller; the file is replayed (answers first, then message ids, then
ratings, each kind oldest first) before the next write and at start. Every write the stores make is
an upsert, so an item written twice (a crash between a replay and the file's removal) is still one row.
A kept rating whose answer the database never got becomes an unattributed rating (the result id it
named kept): it was acknowledged, so it is not dropped.

Several processes may share the file (instances of the bot on one host): appends and the hand-over
to `.replaying` happen under an exclusive lock on `<name>.lock`, and one process at a time replays
(a second one finds the replay lock taken and leaves the file to it).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from feedback.protocol import FeedbackOutcome, FeedbackReceipt, unattributed_from_feedback
from hosting.sqlite_file import quarantine_name

log = logging.getLogger(__name__)

# Order of replay: answers before what refers to them.
KIND_ORDER = {"answer": 0, "message_id": 1, "feedback": 2, "unattributed": 3}

Write = Callable[[str, Any], Awaitable[Any]]


def entry(kind: str, payload: Any) -> dict[str, Any]:
    """The line kept for one write: an answer's row, or the arguments of the other writes."""
    return {"kind": kind, "row" if kind == "answer" else "args": payload}


class PendingFile:
    def __init__(self, path: Path, quarantined: list[str]) -> None:
        self.path = path
        self.replaying_path = path.with_suffix(".replaying")
        # Ratings of answers not (yet) in the database, retried for a while: with several instances,
        # the answer may wait in another instance's file (see `replay`'s hold_unknown).
        self.held_path = path.with_suffix(".held.jsonl")
        self._lock_path = path.with_name(path.name + ".lock")
        self._replay_lock_path = path.with_name(path.name + ".replay-lock")
        self.quarantined = quarantined  # the store's list: quarantined lines are reported with its files

    def exists(self) -> bool:
        """Writes are waiting (or a replay was interrupted): new writes must come after them."""
        return self.path.exists() or self.replaying_path.exists()

    def has_held(self) -> bool:
        return self.held_path.exists()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock_path.open("a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def keep(self, entries: list[dict[str, Any]]) -> None:
        """Append and fsync; raises OSError when the disk does not take them (nothing is acknowledged)."""
        kept_at = datetime.now(UTC).isoformat()
        text = "".join(
            json.dumps({**e, "kept_at": e.get("kept_at", kept_at)}, ensure_ascii=False) + "\n"
            for e in entries
        )
        with self._locked():
            _append(self.path, text)
        log.warning(
            "feedback database unavailable: kept %d write(s) (%s) in %s",
            len(entries),
            ", ".join(sorted({str(e["kind"]) for e in entries})),
            self.path.name,
        )

    def _take(self) -> list[dict[str, Any]]:
        """Move the file to `.replaying` (appending to one a crash left behind) and parse it.
        Lines that are not valid entries (a torn write) go to a quarantine file, logged as an ERROR."""
        with self._locked():
            for source in (self.path, self.held_path):
                if not source.exists():
                    continue
                if self.replaying_path.exists():
                    with self.replaying_path.open("a+", encoding="utf-8") as f:
                        f.seek(0)
                        ends_clean = f.read().endswith("\n") or f.tell() == 0
                        f.write(("" if ends_clean else "\n") + source.read_text("utf-8", errors="replace"))
                        f.flush()
                        os.fsync(f.fileno())
                    source.unlink()
                else:
                    source.rename(self.replaying_path)
        if not self.replaying_path.exists():
            return []
        entries: list[dict[str, Any]] = []
        bad: list[str] = []
        for line in self.replaying_path.read_text("utf-8", errors="replace").splitlines():
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError:
                bad.append(line)
                continue
            if isinstance(item, dict) and item.get("kind") in KIND_ORDER:
                entries.append(item)
            else:
                bad.append(line)
        if bad:
            self._quarantine_lines(bad, "not a valid entry")
        # Stable: within a kind, oldest first (a re-kept tail keeps its first kept_at).
        entries.sort(key=lambda e: (KIND_ORDER[str(e["kind"])], str(e.get("kept_at", ""))))
        return entries

    def _quarantine_lines(self, lines: list[str], reason: str) -> None:
        target = quarantine_name(self.path)
        _append(target, "".join(line + "\n" for line in lines))
        self.quarantined.append(str(target))
        log.error(
            "%d line(s) of %s could not be replayed (%s): kept in %s",
            len(lines),
            self.path.name,
            reason,
            target.name,
        )

    async def replay(
        self, write: Write, unavailable: Callable[[BaseException], bool], hold_unknown: float = 0.0
    ) -> int:
        """Write what the file holds with `write(kind, payload)` (one transaction each); returns the
        rows written. An error for which `unavailable` is true (the database still refuses) puts that
        entry and the rest back in the file, in order, for the next replay; an entry failing otherwise
        is moved to a quarantine file. A rating of an answer the database does not have is held
        (`held_path`) and tried again with the next replays while it was kept less than
        `hold_unknown` seconds ago; after that it is written as an unattributed rating. When another
        process is replaying the file, returns 0 and leaves it to that process."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._replay_lock_path.open("a") as lock:
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return 0
            try:
                return await self._replay(write, unavailable, hold_unknown)
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    async def _replay(
        self, write: Write, unavailable: Callable[[BaseException], bool], hold_unknown: float
    ) -> int:
        entries = self._take()
        if not entries and not self.replaying_path.exists():
            return 0
        written = 0
        unusable: list[str] = []
        held: list[dict[str, Any]] = []
        for i, item in enumerate(entries):
            kind = str(item["kind"])
            payload = item.get("row") if kind == "answer" else item.get("args")
            try:
                if kind == "answer" and not isinstance(payload, list):
                    raise ValueError("an answer entry needs a row")
                if kind != "answer" and not isinstance(payload, dict):
                    raise ValueError(f"a {kind} entry needs args")
                result = await write(kind, payload)
                unknown = (
                    isinstance(result, FeedbackReceipt) and result.outcome is FeedbackOutcome.UNKNOWN_ANSWER
                )
                if unknown and _age(item) < hold_unknown:
                    held.append(item)
                    continue
                if unknown:
                    # Acknowledged to its user, so kept: apart, never on another answer.
                    assert isinstance(payload, dict)
                    kept_at = str(item.get("kept_at") or "") or datetime.now(UTC).isoformat()
                    entries[i] = item = entry("unattributed", unattributed_from_feedback(payload, kept_at))
                    await write("unattributed", item["args"])
                    log.warning(
                        "pending rating for unknown answer %s stored as unattributed", payload["result_id"]
                    )
            except Exception as exc:
                if unavailable(exc):
                    # Still refused: this and the rest wait for the next replay (order kept).
                    self.keep(entries[i:])
                    break
                # Wrong fields, or data the database rejects: replaying it again would not help, and
                # it must not hold back the entries after it.
                log.warning("unusable pending %s entry: %s: %s", kind, type(exc).__name__, exc)
                unusable.append(json.dumps(item, ensure_ascii=False))
                continue
            written += 1
        if held:
            self._hold(held)
        if unusable:
            self._quarantine_lines(unusable, "wrong fields, or refused by the database")
        self.replaying_path.unlink(missing_ok=True)
        if written:
            log.info("replayed %d pending feedback writes", written)
        return written

    def _hold(self, entries: list[dict[str, Any]]) -> None:
        text = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries)
        with self._locked():
            _append(self.held_path, text)
        log.info(
            "held %d pending rating(s) of answers not in the database yet (kept by another instance?)",
            len(entries),
        )


def _append(path: Path, text: str) -> None:
    """Append and fsync: the lines are on disk before anyone is told they were kept."""
    with path.open("a", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _age(item: dict[str, Any]) -> float:
    """Seconds since the entry was first kept (infinite when it does not say)."""
    try:
        kept_at = datetime.fromisoformat(str(item["kept_at"]))
    except (KeyError, ValueError):
        return float("inf")
    if kept_at.tzinfo is None:
        return float("inf")
    return (datetime.now(UTC) - kept_at).total_seconds()
