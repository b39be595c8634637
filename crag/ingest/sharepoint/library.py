"""The Graph calls of a SharePoint library sync, through msgraph-sdk (no other module calls Graph).

    GET /sites/{host}:/{path}                      the site (Sites.Read.All or Sites.Selected)
    GET /sites/{site}/drive | /sites/{site}/drives the default library, or the named one
    GET /drives/{drive}/root, /root:/{folder}:     the root and the configured folder
    GET /drives/{drive}/items/root/delta           changes since the delta link (Files.Read.All or
                                                   Sites.Read.All), page by page
    GET /drives/{drive}/items/{id}                 a file whose folder moved (its new webUrl)
    GET /drives/{drive}/items/{id}/permissions     who may read it
    GET /drives/{drive}/items/{id}/content         its bytes (a redirect to a download URL)

Delta runs on the library's root even when only a folder is indexed: SharePoint and OneDrive for
Business support delta on the root only, and a file moved out of the folder must be seen leaving.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import quote, unquote

from kiota_abstractions.base_request_configuration import RequestConfiguration
from kiota_abstractions.headers_collection import HeadersCollection
from msgraph.generated.drives.item.items.item.delta.delta_request_builder import DeltaRequestBuilder
from msgraph.generated.models.drive import Drive
from msgraph.generated.models.drive_item import DriveItem
from msgraph.generated.models.permission import Permission

from crag.config.sharepoint import graph_site_key
from crag.ingest.sharepoint.sync_state import Location
from crag.providers.graph.client import GraphClient, GraphError

# Removed items come back as deleted (also those the app can no longer see), folders the app cannot
# enter are still walked, and items whose sharing changed are marked (@microsoft.graph.sharedChanged:
# complete only with Sites.FullControl.All, Microsoft's scanning guidance says).
DELTA_PREFER = "deltashowremovedasdeleted, deltatraversepermissiongaps, deltashowsharingchanges"
SHARED_CHANGED = "@microsoft.graph.sharedChanged"
MAX_PAGES = 100_000  # a bound on a malfunctioning server's endless next links
T = TypeVar("T")


@dataclass(frozen=True)
class DeltaPage:
    items: list[DriveItem]
    delta_link: str  # on the last page only: where to ask next time


class Library:
    def __init__(self, client: GraphClient, site: str, drive: str = "", folder: str = "") -> None:
        self.client = client
        self.site = graph_site_key(site)
        self.drive = drive.strip()
        self.folder = folder.strip("/")

    async def locate(self) -> Location:
        """Find the site, the library and the folder; GraphError(kind not_found) names what is missing."""
        sdk = self.client.sdk
        site = await self._get(f"site {self.site!r}", lambda: sdk.sites.by_site_id(self.site).get())
        if site is None or not site.id:
            raise GraphError(f"site {self.site!r} not found", "not_found")
        drive = await self._drive(site.id)
        if not drive.id:
            raise GraphError(f"the library of site {self.site!r} has no id", "unavailable")
        items = sdk.drives.by_drive_id(drive.id).items
        root = await self._get("the library's root", lambda: items.by_drive_item_id("root").get())
        if root is None or not root.id:
            raise GraphError("the library's root was not found", "not_found")
        folder_id = ""
        if self.folder:
            path = quote(self.folder, safe="/")
            what = f"folder {self.folder!r} in library {drive.name!r}"
            folder = await self._get(what, lambda: items.by_drive_item_id(f"root:/{path}:").get())
            if folder is None or not folder.id or folder.folder is None:
                raise GraphError(f"{what} is not a folder", "not_found")
            folder_id = folder.id
        return Location(
            site=self.site,
            site_id=site.id,
            drive_id=drive.id,
            drive_name=drive.name or "",
            drive_url=drive.web_url or "",
            root_id=root.id,
            folder=self.folder,
            folder_id=folder_id,
        )

    async def _get(self, what: str, request: Callable[[], Awaitable[T]]) -> T:
        """One lookup of locate(); a 404 says which of the configured names was not found."""
        try:
            return await self.client.call(f"finding {what}", request)
        except GraphError as exc:
            if exc.kind == "not_found":
                raise GraphError(f"{what} not found ({exc})", "not_found", exc.status) from exc
            raise

    async def _drive(self, site_id: str) -> Drive:
        site = self.client.sdk.sites.by_site_id(site_id)
        if not self.drive:
            drive = await self.client.call("reading the site's default library", lambda: site.drive.get())
            if drive is None:
                raise GraphError(f"site {self.site!r} has no document library", "not_found")
            return drive
        page = await self.client.call("listing the site's libraries", lambda: site.drives.get())
        drives: list[Drive] = []
        while page is not None:
            drives.extend(page.value or [])
            link = page.odata_next_link
            if not link:
                break
            page = await self.client.call(
                "listing the site's libraries", functools.partial(site.drives.with_url(link).get)
            )
        wanted = self.drive.lower()
        for drive in drives:
            url_name = (drive.web_url or "").rstrip("/").rsplit("/", 1)[-1]
            names = {(drive.id or "").lower(), (drive.name or "").lower(), unquote(url_name).lower()}
            if wanted in names:
                return drive
        known = ", ".join(repr(d.name) for d in drives if d.name) or "none"
        raise GraphError(
            f"library {self.drive!r} not found in site {self.site!r} (it has: {known})", "not_found"
        )

    async def delta(self, location: Location, link: str = "") -> AsyncIterator[DeltaPage]:
        """The pages of changes since `link` (everything, without one); the last page carries the
        next delta link. Raises GraphError(kind="gone") when the link expired (start again without)."""
        builder = self.client.sdk.drives.by_drive_id(location.drive_id).items.by_drive_item_id("root").delta
        headers = HeadersCollection()
        headers.add("Prefer", DELTA_PREFER)
        config = RequestConfiguration[DeltaRequestBuilder.DeltaRequestBuilderGetQueryParameters](
            headers=headers
        )
        url = link
        for _ in range(MAX_PAGES):
            if url:
                page = await self.client.call(
                    "reading the library's changes", functools.partial(builder.with_url(url).get, config)
                )
            else:
                page = await self.client.call("reading the library's changes", lambda: builder.get(config))
            if page is None:
                raise GraphError("the library's changes came back empty", "unavailable")
            next_link = page.odata_next_link or ""
            delta_link = page.odata_delta_link or ""
            yield DeltaPage(list(page.value or []), "" if next_link else delta_link)
            if not next_link:
                if not delta_link:
                    raise GraphError("the library's changes ended without a delta link", "unavailable")
                return
            url = next_link
        raise GraphError("the library's changes did not end", "unavailable")

    async def item(self, location: Location, item_id: str) -> DriveItem | None:
        """The item as it is now (None: it is gone)."""
        items = self.client.sdk.drives.by_drive_id(location.drive_id).items
        try:
            return await self.client.call("reading a file", lambda: items.by_drive_item_id(item_id).get())
        except GraphError as exc:
            if exc.kind == "not_found":
                return None
            raise

    async def permissions(self, location: Location, item_id: str) -> list[Permission]:
        builder = (
            self.client.sdk.drives.by_drive_id(location.drive_id).items.by_drive_item_id(item_id).permissions
        )
        page = await self.client.call("reading a file's permissions", lambda: builder.get())
        out: list[Permission] = []
        for _ in range(MAX_PAGES):
            if page is None:
                break
            out.extend(page.value or [])
            link = page.odata_next_link
            if not link:
                break
            page = await self.client.call(
                "reading a file's permissions", functools.partial(builder.with_url(link).get)
            )
        return out

    async def content(self, location: Location, item_id: str) -> bytes:
        builder = (
            self.client.sdk.drives.by_drive_id(location.drive_id).items.by_drive_item_id(item_id).content
        )
        data = await self.client.call("downloading a file", lambda: builder.get())
        return data or b""


def is_shared_changed(item: DriveItem) -> bool:
    return str(item.additional_data.get(SHARED_CHANGED, "")).lower() == "true"
