"""What the serving index holds and how the watcher fares, as /api/health and /docs/ read them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from crag.retrieval.search.local_index import LocalIndex


@dataclass
class IndexInfo:
    documents: int = 0
    chunks: int = 0
    skipped: list[str] = field(default_factory=list)
    remote: bool = False  # documents in a remote index (Azure AI Search): counts are not known here
    provider: str = "local"  # the search provider's name
    files: frozenset[str] = frozenset()  # relative paths the local index holds: what /docs/ may serve
    # Who may read each of those files (crag/core/access.py; None: unknown): /docs/ checks it when trimming.
    readers: dict[str, tuple[str, ...] | None] = field(default_factory=dict)
    updated_at: str = ""  # when this index was loaded or built (ISO 8601, UTC)
    ocr: dict[str, object] = field(default_factory=dict)  # scanned pages read and skipped (ocr_status)

    @property
    def unknown_files(self) -> list[str]:
        """Files of the local index no access rule covers."""
        return sorted(f for f, allowed in self.readers.items() if allowed is None)


@dataclass
class WatchInfo:
    """The documents watcher, for /api/health."""

    enabled: bool = False
    rebuilds: int = 0  # indexes swapped in since start
    last_change: str = ""  # what the last rebuild found: "+1 ~0 -0 files in 0.4s"
    error: str = ""  # why the last rebuild failed (the previous index kept serving), or why watching stopped


def index_info(index: LocalIndex) -> IndexInfo:
    readers = {chunk.file: chunk.allowed for chunk in index.chunks}
    return IndexInfo(
        documents=index.documents,
        chunks=index.size,
        skipped=list(index.skipped),
        files=frozenset(readers),
        readers=readers,
        updated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        ocr=ocr_status(index),
    )


def ocr_status(index: LocalIndex) -> dict[str, object]:
    """For /api/health: the OCR engine, the scanned pages the index holds and those it could not read,
    with the reason the first such file gave (how to install Tesseract, the service's error)."""
    scans = index.scans.values()
    status: dict[str, object] = {
        "engine": index.ocr_engine,
        "pages_read": sum(int(s.get("read", 0)) for s in scans),
        "pages_skipped": sum(int(s.get("scanned", 0)) - int(s.get("read", 0)) for s in scans),
    }
    reasons = [str(s.get("reason")) for s in scans if s.get("reason") and s.get("read") != s.get("scanned")]
    if reasons:
        status["notice"] = reasons[0]
    return status


def changes(before: dict[str, str], after: dict[str, str]) -> tuple[list[str], list[str], list[str]]:
    """(added, changed, removed) files between two indexes' file -> content hash maps."""
    added = sorted(after.keys() - before.keys())
    changed = sorted(f for f in after.keys() & before.keys() if after[f] != before[f])
    return added, changed, sorted(before.keys() - after.keys())
