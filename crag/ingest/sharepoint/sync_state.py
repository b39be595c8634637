"""What the last sync of a library saw: each item by id, and the delta link to ask for what changed.

Graph's delta feed reports an item by id with its parent's id, never its path ("renaming a folder
doesn't result in any descendants of the folder being returned", Graph docs): paths are worked out
here from the parent chain, so a renamed or moved folder moves every file below it. A file's
`key` (its content version, citation link and readers) is what an index stores for it: when the key
differs from the indexed one, the file is read again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field

from crag.ingest.loaders import is_supported

MAX_DEPTH = 400  # deeper chains are broken ones (a cycle in a malformed feed), not folders


class Entry(BaseModel):
    name: str
    parent: str = ""  # the parent folder's item id ("" for the library's root)
    folder: bool = False
    version: str = ""  # the file's content version: a content hash, else its eTag
    url: str = ""  # webUrl: the citation link
    size: int = 0
    allowed: tuple[str, ...] | None = None  # who may read it (None: not known, e.g. not read yet)
    unmapped: tuple[str, ...] = ()  # permission grants that could not be mapped to principals
    skipped: str = ""  # why the version of `skipped_key` could not be indexed
    skipped_key: str = ""


class Location(BaseModel):
    """Where the library is, as resolved from the settings."""

    site: str  # as configured (a Graph site key)
    site_id: str
    drive_id: str
    drive_name: str = ""
    drive_url: str = ""
    root_id: str  # the drive's root item
    folder: str = ""  # as configured ("" = the whole library)
    folder_id: str = ""  # the item id of the folder ("" = the root)


class LibraryState(BaseModel):
    location: Location
    delta_link: str = ""
    mapping: str = ""  # mapping_version of the site group mapping the readers were worked out with
    items: dict[str, Entry] = Field(default_factory=dict)

    def path(self, item_id: str) -> str | None:
        """The item's path from the library root ("HR/Policies/leave.docx"), or None when its chain
        of parents does not reach the root (a parent not seen, or deleted)."""
        parts: list[str] = []
        current = item_id
        for _ in range(MAX_DEPTH):
            if current == self.location.root_id:
                return "/".join(reversed(parts))
            entry = self.items.get(current)
            if entry is None or not entry.name:
                return None
            parts.append(entry.name)
            current = entry.parent
        return None

    def in_scope(self, item_id: str) -> bool:
        """Whether the item is under the configured folder (anywhere in the library without one)."""
        top = self.location.folder_id or self.location.root_id
        current = item_id
        for _ in range(MAX_DEPTH):
            if current == top:
                return True
            entry = self.items.get(current)
            if entry is None:
                return False
            current = entry.parent
        return False

    def files(self) -> dict[str, str]:
        """path -> item id of every file in scope that the loaders can read."""
        out: dict[str, str] = {}
        for item_id, entry in self.items.items():
            if entry.folder or not is_supported(entry.name) or not self.in_scope(item_id):
                continue
            path = self.path(item_id)
            if path:
                out[path] = item_id
        return out

    def below(self, folder_id: str) -> list[str]:
        """The ids of the files anywhere under a folder."""
        out = []
        for item_id, entry in self.items.items():
            if entry.folder:
                continue
            current = entry.parent
            for _ in range(MAX_DEPTH):
                if current == folder_id:
                    out.append(item_id)
                    break
                parent = self.items.get(current)
                if parent is None:
                    break
                current = parent.parent
        return out


def file_key(entry: Entry) -> str:
    """What an index stores for a file: changes with its content, its link or who may read it."""
    shape = [entry.version, entry.url, None if entry.allowed is None else list(entry.allowed)]
    return hashlib.sha256(json.dumps(shape).encode()).hexdigest()


def mapping_version(site_groups: Mapping[str, Sequence[str]]) -> str:
    """Changes when CRAG_SHAREPOINT_SITE_GROUPS does (every file's readers are then read again)."""
    canonical = {name: sorted(ids) for name, ids in site_groups.items()}
    return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()[:16]
