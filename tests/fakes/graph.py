"""A Microsoft Graph and Entra ID stand-in on 127.0.0.1: what the real msgraph-sdk and azure-identity
send while the bot syncs a SharePoint library and reads a user's groups.

Graph (plain http: Kiota's auth provider sends tokens over http to localhost only), under /v1.0:
    GET sites/{host}:/{path} | sites/{id} | sites/{id}/drive | sites/{id}/drives
    GET drives/{id} | drives/{id}/items/{item | root | root:/{path}:} | .../children
    GET drives/{id}/items/root/delta() — pages of `page_size` items with @odata.nextLink, then an
        @odata.deltaLink; later calls with that link return what changed since: changed items,
        deleted ones (`deleted` facet, no name), moved ones (new parentReference; a moved or renamed
        folder's files are not listed again, as in Graph); `@microsoft.graph.sharedChanged` on items
        whose own permissions changed
    GET drives/{id}/items/{item}/permissions — the item's own and inherited (`inheritedFrom`) ones
    GET drives/{id}/items/{item}/content — a 302 to a download URL, as Graph does
    GET users/{id}/transitiveMemberOf/graph.group — the user's groups, $top per page, @odata.nextLink
Entra ID (TLS, azure-identity refuses anything else), on `authority`:
    POST {tenant}/oauth2/v2.0/token — client credentials; a wrong secret is a 401 invalid_client

Every Graph request needs a token this authority issued (401 InvalidAuthenticationToken otherwise).
`throttle(n, retry_after, match)` answers the next n matching requests 429 with Retry-After;
`expire_delta_links()` makes every issued delta link answer 410 Gone; `delay_s` slows every answer;
`reject_tokens` answers 401 to every token. `requests` records each Graph call.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import secrets
import ssl
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from aiohttp import web

from crag.eval.loopback import serve_on_loopback

GRAPH_PREFIX = "/v1.0"


@dataclass
class FakeItem:
    id: str
    name: str
    parent: str  # "" for the root
    folder: bool
    content: bytes = b""
    seq: int = 0  # the drive's change counter when this item last changed
    shared_seq: int = 0  # ... when its own permissions last changed
    etag: int = 1
    permissions: list[dict[str, Any]] = field(default_factory=list)
    inherit: bool = True  # takes its parents' permissions too
    deleted: bool = False


@dataclass
class FakeDrive:
    id: str
    name: str
    web_url: str
    root_id: str
    items: dict[str, FakeItem] = field(default_factory=dict)
    seq: int = 0


@dataclass
class FakeSite:
    id: str
    host: str
    path: str  # "/sites/hr"; "" for the root site
    name: str
    drives: list[str] = field(default_factory=list)  # the first is the default library


@dataclass
class Recorded:
    method: str
    path: str  # decoded path after /v1.0, with the query
    status: int
    at: float  # time.monotonic()
    authorized: bool
    prefer: str = ""


class FakeGraph:
    def __init__(
        self,
        tenant_id: str = "11111111-2222-3333-4444-555555555555",
        client_id: str = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
        client_secret: str = "fake-secret",
        page_size: int = 3,
    ) -> None:
        self.tenant_id = tenant_id
        self.client_id = client_id
        self.client_secret = client_secret
        self.page_size = page_size
        self.sites: dict[str, FakeSite] = {}
        self.drives: dict[str, FakeDrive] = {}
        self.groups: dict[str, list[str]] = {}  # user id -> group ids (transitive)
        self.roles: dict[str, list[str]] = {}  # user id -> directory role ids (not groups)
        self.requests: list[Recorded] = []
        self.token_requests = 0
        self.delay_s = 0.0  # every Graph answer waits this long (a slow service)
        self.reject_tokens = False  # Graph answers 401 to every token (e.g. one for another tenant)
        self.url = ""  # http://127.0.0.1:PORT/v1.0
        self.authority = ""  # 127.0.0.1:PORT (https)
        self._tokens: set[str] = set()
        self._throttles: list[tuple[str, float]] = []  # (path fragment, Retry-After seconds)
        self._cursors: dict[str, list[dict[str, Any]]] = {}
        self._expired_below = 0  # delta tokens below this answer 410
        self._runners: list[web.AppRunner] = []

    # -- lifecycle --------------------------------------------------------------------------------
    async def start(self, authority_tls: ssl.SSLContext) -> str:
        graph = web.Application()
        graph.router.add_route("*", "/{tail:.*}", self._graph)
        runner, base = await serve_on_loopback(graph)
        self._runners.append(runner)
        self.url = base + GRAPH_PREFIX
        login = web.Application()
        login.router.add_post("/{tenant}/oauth2/v2.0/token", self._token)
        runner, base = await serve_on_loopback(login, authority_tls)
        self._runners.append(runner)
        self.authority = base.removeprefix("https://")
        return self.url

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()

    # -- content ----------------------------------------------------------------------------------
    def add_site(self, host: str, path: str, name: str = "") -> str:
        site_id = f"{host},{uuid.uuid4()},{uuid.uuid4()}"
        self.sites[site_id] = FakeSite(site_id, host, path.rstrip("/"), name or path.rsplit("/", 1)[-1])
        return site_id

    def add_drive(self, site_id: str, name: str, url_name: str = "") -> str:
        site = self.sites[site_id]
        drive_id = "b!" + base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        root = FakeItem(id=_item_id(), name="root", parent="", folder=True)
        web_url = f"https://{site.host}{site.path}/{quote(url_name or name)}"
        drive = FakeDrive(drive_id, name, web_url, root.id, {root.id: root})
        self._touch(drive, root)  # the first delta lists the root too, as Graph's does
        self.drives[drive_id] = drive
        site.drives.append(drive_id)
        return drive_id

    def folder(self, drive_id: str, path: str) -> str:
        """The folder at path (created, with its parents, when missing)."""
        drive = self.drives[drive_id]
        current = drive.root_id
        for name in [p for p in path.split("/") if p]:
            found = self._child(drive, current, name)
            if found is None:
                item = FakeItem(id=_item_id(), name=name, parent=current, folder=True)
                drive.items[item.id] = item
                self._touch(drive, item)
                found = item
            current = found.id
        return current

    def put_file(self, drive_id: str, path: str, content: bytes) -> str:
        """Create the file, or give it new content."""
        drive = self.drives[drive_id]
        folder, _, name = path.rpartition("/")
        parent = self.folder(drive_id, folder)
        item = self._child(drive, parent, name)
        if item is None:
            item = FakeItem(id=_item_id(), name=name, parent=parent, folder=False)
            drive.items[item.id] = item
        item.content = content
        item.etag += 1
        self._touch(drive, item)
        return item.id

    def delete(self, drive_id: str, path: str) -> None:
        drive = self.drives[drive_id]
        item = self.item_at(drive_id, path)
        doomed = [item, *self._descendants(drive, item.id)]
        for each in doomed:
            each.deleted = True
            self._touch(drive, each)

    def move(self, drive_id: str, path: str, new_path: str) -> None:
        """Rename and/or move; only the item itself shows in later deltas (not a folder's files)."""
        drive = self.drives[drive_id]
        item = self.item_at(drive_id, path)
        folder, _, name = new_path.rpartition("/")
        item.parent = self.folder(drive_id, folder)
        item.name = name
        item.etag += 1
        self._touch(drive, item)

    def share(
        self, drive_id: str, path: str, permissions: list[dict[str, Any]], inherit: bool = True
    ) -> None:
        """Set the item's own permissions (Graph permission JSON: grantedToV2, link, roles...)."""
        drive = self.drives[drive_id]
        item = self.item_at(drive_id, path)
        item.permissions = [{"id": p.get("id") or secrets.token_hex(6), **p} for p in permissions]
        item.inherit = inherit
        self._touch(drive, item)
        item.shared_seq = item.seq

    def item_at(self, drive_id: str, path: str) -> FakeItem:
        drive = self.drives[drive_id]
        current = drive.items[drive.root_id]
        for name in [p for p in path.split("/") if p]:
            found = self._child(drive, current.id, name)
            if found is None:
                raise KeyError(path)
            current = found
        return current

    def throttle(self, times: int = 1, retry_after: float = 1, match: str = "") -> None:
        """The next `times` Graph requests whose path contains `match` get a 429."""
        self._throttles.extend([(match, retry_after)] * times)

    def expire_delta_links(self) -> None:
        for drive in self.drives.values():
            self._expired_below = max(self._expired_below, drive.seq + 1)

    def graph_calls(self, fragment: str) -> list[Recorded]:
        return [r for r in self.requests if fragment in r.path]

    # -- Entra ID ---------------------------------------------------------------------------------
    async def _token(self, request: web.Request) -> web.Response:
        self.token_requests += 1
        form = await request.post()
        if request.match_info["tenant"] != self.tenant_id:
            return _aad_error(400, "invalid_request", "AADSTS90002: Tenant not found.")
        if form.get("client_id") != self.client_id:
            return _aad_error(
                400, "unauthorized_client", "AADSTS700016: Application not found in the directory."
            )
        if form.get("client_secret") != self.client_secret:
            return _aad_error(401, "invalid_client", "AADSTS7000215: Invalid client secret provided.")
        if form.get("grant_type") != "client_credentials":
            return _aad_error(400, "unsupported_grant_type", "AADSTS70003: unsupported grant type.")
        token = secrets.token_urlsafe(24)
        self._tokens.add(token)
        return web.json_response(
            {"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": token}
        )

    def accept(self, token: str) -> None:
        """Take a token another authority issued (a managed identity's) as one of this Graph's."""
        self._tokens.add(token)

    # -- Graph ------------------------------------------------------------------------------------
    async def _graph(self, request: web.Request) -> web.StreamResponse:
        raw = request.rel_url.raw_path
        if raw.startswith("/download/"):
            return self._download(raw)
        path = raw.removeprefix(GRAPH_PREFIX)
        segments = [unquote(s) for s in path.strip("/").split("/")]
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        authorized = token in self._tokens and not self.reject_tokens
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        shown = "/".join(segments) + (
            f"?{request.rel_url.query_string}" if request.rel_url.query_string else ""
        )
        response = self._answer(request, segments, authorized)
        self.requests.append(
            Recorded(
                request.method,
                shown,
                response.status,
                time.monotonic(),
                authorized,
                request.headers.get("Prefer", ""),
            )
        )
        return response

    def _answer(self, request: web.Request, segments: list[str], authorized: bool) -> web.Response:
        if not authorized:
            return _graph_error(401, "InvalidAuthenticationToken", "Access token is empty or invalid.")
        for i, (match, retry_after) in enumerate(self._throttles):
            if match in "/".join(segments):
                del self._throttles[i]
                return _graph_error(
                    429, "TooManyRequests", "Too many requests.", {"Retry-After": f"{retry_after:g}"}
                )
        if request.method != "GET":
            return _graph_error(405, "BadRequest", "Only GET is faked.")
        try:
            if segments[0] == "sites":
                return self._site(segments[1:])
            if segments[0] == "drives":
                return self._drive_route(request, segments[1:])
            if segments[0] == "users" and len(segments) >= 3 and segments[2] == "transitiveMemberOf":
                return self._member_of(request, segments[1], segments[3:])
        except KeyError:
            return _graph_error(404, "itemNotFound", "The resource could not be found.")
        return _graph_error(400, "BadRequest", f"Unsupported request: {'/'.join(segments)}")

    def _site(self, rest: list[str]) -> web.Response:
        key = rest[0]
        site = self.sites.get(key) or next(
            (s for s in self.sites.values() if key in (f"{s.host}:{s.path}", f"{s.host}:{s.path}:")), None
        )
        if site is None and ":" not in key:
            site = next((s for s in self.sites.values() if s.host == key and not s.path), None)
        if site is None:
            return _graph_error(404, "itemNotFound", "Requested site could not be found")
        if len(rest) == 1:
            return web.json_response(self._site_json(site))
        if rest[1] == "drive" and site.drives:
            return web.json_response(self._drive_json(self.drives[site.drives[0]]))
        if rest[1] == "drives":
            return web.json_response({"value": [self._drive_json(self.drives[d]) for d in site.drives]})
        raise KeyError(rest[1])

    def _drive_route(self, request: web.Request, rest: list[str]) -> web.Response:
        drive = self.drives[rest[0]]
        if len(rest) == 1:
            return web.json_response(self._drive_json(drive))
        if rest[1] != "items" or len(rest) < 3:
            raise KeyError(rest[1])
        key = rest[2]
        if key == "root":
            item = drive.items[drive.root_id]
        elif key.startswith("root:"):
            item = self.item_at(drive.id, key.removeprefix("root:").strip(":"))
        else:
            item = drive.items[key]
        if item.deleted:
            raise KeyError(key)
        action = rest[3] if len(rest) > 3 else ""
        if action == "":
            return web.json_response(self._item_json(drive, item))
        if action in ("delta", "delta()"):
            return self._delta(request, drive)
        if action == "children":
            children = [
                self._item_json(drive, c)
                for c in drive.items.values()
                if c.parent == item.id and not c.deleted
            ]
            return web.json_response({"value": children})
        if action == "permissions":
            return web.json_response({"value": self._permissions(drive, item)})
        if action == "content":
            location = f"{self.url.removesuffix(GRAPH_PREFIX)}/download/{drive.id}/{item.id}?v={item.etag}"
            return web.Response(status=302, headers={"Location": location})
        raise KeyError(action)

    def _download(self, raw: str) -> web.Response:
        _, _, drive_id, item_id = raw.split("?")[0].split("/")
        drive = self.drives.get(unquote(drive_id))
        item = drive.items.get(unquote(item_id)) if drive else None
        if item is None or item.deleted:
            return web.Response(status=404)
        return web.Response(body=item.content, content_type="application/octet-stream")

    def _delta(self, request: web.Request, drive: FakeDrive) -> web.Response:
        query = request.rel_url.query
        base = f"{self.url}/drives/{quote(drive.id)}/items/root/delta()"
        cursor = query.get("cursor")
        if cursor is None:
            token = int(query.get("token", "0"))
            if "token" in query and token < self._expired_below:
                fresh = f"{base}?token=0"
                return _graph_error(
                    410, "resyncRequired", "resyncChangesApplyDifferences", {"Location": fresh}
                )
            prefer = request.headers.get("Prefer", "")
            changed = sorted((i for i in drive.items.values() if i.seq > token), key=lambda i: i.seq)
            if token == 0:
                changed = [i for i in changed if not i.deleted]
            items = [self._delta_json(drive, i, token, "deltashowsharingchanges" in prefer) for i in changed]
            cursor = secrets.token_hex(6)
            self._cursors[cursor] = [*items, {"@snapshot": drive.seq}]
        pages = self._cursors[cursor]
        page = int(query.get("page", "0"))
        snapshot = pages[-1]["@snapshot"]
        items = pages[:-1]
        chunk = items[page * self.page_size : (page + 1) * self.page_size]
        body: dict[str, Any] = {"value": chunk}
        if (page + 1) * self.page_size < len(items):
            body["@odata.nextLink"] = f"{base}?cursor={cursor}&page={page + 1}"
        else:
            body["@odata.deltaLink"] = f"{base}?token={snapshot}"
            del self._cursors[cursor]
        return web.json_response(body)

    def _member_of(self, request: web.Request, user_id: str, cast: list[str]) -> web.Response:
        if user_id not in self.groups and user_id not in self.roles:
            return _graph_error(404, "Request_ResourceNotFound", f"Resource '{user_id}' does not exist.")
        groups = [{"@odata.type": "#microsoft.graph.group", "id": g} for g in self.groups.get(user_id, [])]
        roles = [
            {"@odata.type": "#microsoft.graph.directoryRole", "id": r} for r in self.roles.get(user_id, [])
        ]
        only_groups = bool(cast) and cast[0] in ("graph.group", "microsoft.graph.group")
        found = groups if only_groups else groups + roles
        top = int(request.rel_url.query.get("$top", "100"))
        skip = int(request.rel_url.query.get("$skiptoken", "0"))
        body: dict[str, Any] = {"value": found[skip : skip + top]}
        if skip + top < len(found):
            path = "/".join(["users", user_id, "transitiveMemberOf", *cast])
            body["@odata.nextLink"] = f"{self.url}/{path}?$top={top}&$skiptoken={skip + top}"
        return web.json_response(body)

    # -- JSON shapes ------------------------------------------------------------------------------
    def _site_json(self, site: FakeSite) -> dict[str, Any]:
        return {
            "id": site.id,
            "name": site.name,
            "displayName": site.name,
            "webUrl": f"https://{site.host}{site.path}",
        }

    def _drive_json(self, drive: FakeDrive) -> dict[str, Any]:
        return {"id": drive.id, "name": drive.name, "driveType": "documentLibrary", "webUrl": drive.web_url}

    def _path(self, drive: FakeDrive, item: FakeItem) -> str:
        parts = []
        current = item
        while current.parent:
            parts.append(current.name)
            current = drive.items[current.parent]
        return "/".join(reversed(parts))

    def _item_json(self, drive: FakeDrive, item: FakeItem) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": item.id,
            "name": item.name,
            "eTag": f'"{{{item.id}}},{item.etag}"',
            "webUrl": f"{drive.web_url}/{quote(self._path(drive, item))}".rstrip("/"),
            "parentReference": {"driveId": drive.id, "id": item.parent}
            if item.parent
            else {"driveId": drive.id},
            "lastModifiedDateTime": "2026-12-01T00:00:00Z",
        }
        if item.id == drive.root_id:
            body["root"] = {}
        if item.folder:
            body["folder"] = {"childCount": sum(1 for c in drive.items.values() if c.parent == item.id)}
        else:
            body["size"] = len(item.content)
            body["file"] = {
                "mimeType": "application/octet-stream",
                "hashes": {"quickXorHash": _hash(item.content)},
            }
        return body

    def _delta_json(self, drive: FakeDrive, item: FakeItem, token: int, sharing: bool) -> dict[str, Any]:
        if item.deleted:  # Graph leaves the name out of deleted items
            return {"id": item.id, "deleted": {"state": "deleted"}, "parentReference": {"driveId": drive.id}}
        body = self._item_json(drive, item)
        if sharing and token and item.shared_seq > token:
            body["@microsoft.graph.sharedChanged"] = "True"
        return body

    def _permissions(self, drive: FakeDrive, item: FakeItem) -> list[dict[str, Any]]:
        out = [dict(p) for p in item.permissions]
        current = item
        while current.inherit and current.parent:
            current = drive.items[current.parent]
            for p in current.permissions:
                out.append({**p, "inheritedFrom": {"driveId": drive.id, "id": current.id}})
        return out

    # -- helpers ----------------------------------------------------------------------------------
    def _child(self, drive: FakeDrive, parent: str, name: str) -> FakeItem | None:
        return next(
            (i for i in drive.items.values() if i.parent == parent and i.name == name and not i.deleted), None
        )

    def _descendants(self, drive: FakeDrive, item_id: str) -> list[FakeItem]:
        out = []
        for child in drive.items.values():
            if child.parent == item_id and not child.deleted:
                out.append(child)
                out.extend(self._descendants(drive, child.id))
        return out

    def _touch(self, drive: FakeDrive, item: FakeItem) -> None:
        drive.seq += 1
        item.seq = drive.seq


_ids = itertools.count(1)


def _item_id() -> str:
    return f"01FAKE{next(_ids):06d}"


def _hash(content: bytes) -> str:
    return base64.b64encode(hashlib.sha1(content).digest()).decode()


def _graph_error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(
        {"error": {"code": code, "message": message, "innerError": {"request-id": str(uuid.uuid4())}}},
        status=status,
        headers=headers,
    )


def _aad_error(status: int, error: str, description: str) -> web.Response:
    return web.json_response(
        {
            "error": error,
            "error_description": description,
            "error_codes": [int(description[6:].split(":")[0])],
        },
        status=status,
    )
