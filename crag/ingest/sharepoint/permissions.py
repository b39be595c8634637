"""Who may read a file, from its Graph permissions (`GET /drives/{d}/items/{i}/permissions`), as the
principals of crag/core/access.py: Entra object ids of users and groups, or EVERYONE.

Graph lists a file's effective permissions, its own and those inherited from its folders. Each one
is mapped on its own; any role (read, write, owner...) lets its holder read. What is mapped:

- a user (`grantedToV2.user.id`) or an Entra group, Microsoft 365 or security (`grantedToV2.group.id`):
  its object id;
- a sharing link: scope `anonymous` (anyone with the link) and `organization` (anyone in the company)
  -> EVERYONE; scope `users` -> the people and groups it was given to (`grantedToIdentitiesV2`);
  scope `existingAccess` gives no one new access -> nothing;
- SharePoint claims in `siteUser.loginName`: "Everyone" and "Everyone except external users" ->
  EVERYONE; an Entra group claim (`c:0o.c|federateddirectoryclaimprovider|<id>`,
  `c:0t.c|tenant|<id>`) -> that group's id;
- a SharePoint site group (`grantedToV2.siteGroup`, e.g. "HR Members"): only through
  CRAG_SHAREPOINT_SITE_GROUPS (display name -> Entra ids). Graph v1.0 cannot list a site group's
  members, so an unmapped one grants no one access here, and is reported.

What is not mapped (reported as unmapped, never widened into access): users without an Entra id
(external people invited by e-mail), site users known only by a login name, applications, expired
permissions. Reading the permissions failing is not "nobody": the file's access is then unknown
(None), which trimming treats as its setting says.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from msgraph.generated.models.permission import Permission
from msgraph.generated.models.share_point_identity_set import SharePointIdentitySet

from crag.core.access import EVERYONE, normalize

_GUID = re.compile(r"^[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")
# SharePoint's claims for the whole organization: "Everyone except external users" and "Everyone".
_EVERYONE_CLAIMS = ("spo-grid-all-users", "c:0(.s|true", "c:0-.f|rolemanager|everyone")
# Entra groups as SharePoint claims: Microsoft 365 groups and security groups.
_GROUP_CLAIM = re.compile(
    r"^c:0[ot]\.c\|(?:federateddirectoryclaimprovider|tenant)\|([0-9a-fA-F-]{36})(?:_o)?$"
)


@dataclass(frozen=True)
class Access:
    allowed: tuple[str, ...]  # normalized principals; empty: permissions read, nobody mapped
    unmapped: tuple[str, ...] = ()  # grants that could not be mapped, for the report


def access_from(
    permissions: Iterable[Permission],
    site_groups: Mapping[str, Sequence[str]] | None = None,
    now: datetime | None = None,
) -> Access:
    """The principals the permissions let read the file. site_groups: lower-case site group display
    names (or login names) -> principals."""
    now = now or datetime.now(UTC)
    groups = site_groups or {}
    allowed: list[str] = []
    unmapped: list[str] = []
    for permission in permissions:
        expires = permission.expiration_date_time
        if expires is not None and _aware(expires) <= now:
            continue
        link = permission.link
        scope = (link.scope or "").lower() if link is not None else ""
        if scope in ("anonymous", "organization"):
            allowed.append(EVERYONE)
            continue
        if scope == "existingaccess":
            continue
        identities = [*(permission.granted_to_identities_v2 or [])]
        if permission.granted_to_v2 is not None:
            identities.append(permission.granted_to_v2)
        for identity in identities:
            _map_identity(identity, groups, allowed, unmapped)
    return Access(normalize(allowed), tuple(dict.fromkeys(unmapped)))


def _map_identity(
    identity: SharePointIdentitySet,
    site_groups: Mapping[str, Sequence[str]],
    allowed: list[str],
    unmapped: list[str],
) -> None:
    found = False
    for entity in (identity.user, identity.group):
        if entity is not None and entity.id and _GUID.match(entity.id):
            allowed.append(entity.id)
            found = True
    site_user = identity.site_user
    if site_user is not None and site_user.login_name:
        login = site_user.login_name.lower()
        claim = _GROUP_CLAIM.match(login)
        if any(mark in login for mark in _EVERYONE_CLAIMS):
            allowed.append(EVERYONE)
            found = True
        elif claim:
            allowed.append(claim.group(1))
            found = True
    site_group = identity.site_group
    if site_group is not None:
        names = [n.strip().lower() for n in (site_group.display_name, site_group.login_name) if n]
        mapped = next((site_groups[n] for n in names if n in site_groups), None)
        if mapped is not None:
            allowed.extend(mapped)
        else:
            unmapped.append(f"SharePoint site group {site_group.display_name or site_group.login_name!r}")
        return
    if found:
        return
    user = identity.user
    if user is not None:
        unmapped.append(f"user {user.display_name or '?'!r} without an Entra object id")
    elif site_user is not None:
        unmapped.append(f"site user {site_user.display_name or site_user.login_name or '?'!r}")


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
