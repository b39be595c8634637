"""Who may read a document: the contract between the sources that know (SharePoint permissions, a
local folder's access file) and the retrieval that trims results to the asking user (issue #17).

A principal is an Entra ID object id (a user's or a group's: both are GUIDs, unique across kinds),
or EVERYONE for a document the whole organization may read (an organization-wide sharing link, the
"Everyone except external users" group). A document's `allowed` is a tuple of principals, or None
when its permissions are unknown (what happens to those is a setting: denied while trimming is on).
A reader is the set of principals of the asking user: their own object id, their groups (transitive),
and EVERYONE. A reader may read a document when the two sets meet.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable
from typing import Protocol

EVERYONE = "*"


def normalize(principals: Iterable[str]) -> tuple[str, ...]:
    """Sorted, unique, lower-case principals (Graph returns GUIDs in either case)."""
    return tuple(sorted({p.strip().lower() for p in principals if p and p.strip()}))


def may_read(allowed: Collection[str] | None, reader: Collection[str], unknown_allowed: bool = False) -> bool:
    """Whether a reader (their principals) may read a document with these allowed principals."""
    if allowed is None:
        return unknown_allowed
    return not set(allowed).isdisjoint(reader)


# The access file a documents folder may hold (crag/access/files.py reads it).
ACCESS_FILE_NAME = ".access.toml"


class MembershipSource(Protocol):
    """Where a user's groups come from: Microsoft Graph (`/users/{id}/transitiveMemberOf`) in a
    company, a local mapping where there is none. Callers cache the answer and decide what a failure
    means (trimming fails closed: the user keeps only their own id and EVERYONE)."""

    name: str

    async def groups_of(self, user_id: str) -> tuple[str, ...]:
        """Object ids of the groups the user is a member of, directly or through other groups.
        Raises on failure; an unknown user is an empty tuple."""
        ...


# -- readers (added for trimming: the engine's turn carries one, the answer cache keys by it) -------
# The principals of the asking user, or None when access trimming is off (every document readable).
Reader = frozenset[str]


def reader_of(user_id: str | None, groups: Iterable[str] = ()) -> Reader:
    """A user's reader: their own id, their groups, and EVERYONE; only EVERYONE for no user."""
    return frozenset({EVERYONE, *normalize([user_id or "", *groups])})


def scope(reader: Reader | None) -> str:
    """The answer cache's scope of a reader: "" with trimming off; else a digest of the principals,
    so that an answer is only ever served to a reader with exactly the same permissions."""
    if reader is None:
        return ""
    joined = "\n".join(sorted(reader))
    return "reader:" + hashlib.sha256(joined.encode("utf-8", "surrogatepass")).hexdigest()
