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


class MembershipSource(Protocol):
    """Where a user's groups come from: Microsoft Graph (`/users/{id}/transitiveMemberOf`) in a
    company, a local mapping where there is none. Callers cache the answer and decide what a failure
    means (trimming fails closed: the user keeps only their own id and EVERYONE)."""

    name: str

    async def groups_of(self, user_id: str) -> tuple[str, ...]:
        """Object ids of the groups the user is a member of, directly or through other groups.
        Raises on failure; an unknown user is an empty tuple."""
        ...
