"""GET /docs/{path}: the files of the local index, so a card's citation opens its document.

Only a file the index holds is served (the indexer already skips hidden files and folders and
symlinks), and only while it is still a regular file reached without a symlink: the documents
folder may hold anything else (.env, .git/, a link to /etc/passwd), and none of that is the bot's
to give away. With an app id the link must also carry a valid signature (hosting/doc_links.py).

Every answer is served so that nothing in it can run on the bot's origin, where /chat and the
Direct Line token endpoint live: no MIME sniffing, and a sandbox policy (scripts off, opaque origin)
on everything but PDF, whose built-in browser viewer does not open in a sandbox.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from urllib.parse import quote

from aiohttp import web

from crag.ingest.loaders import is_indexable
from hosting.doc_links import DocLinks

log = logging.getLogger(__name__)

_TEXT = "text/plain; charset=utf-8"
# suffix → (Content-Type, shown in the browser rather than downloaded)
_TYPES: dict[str, tuple[str, bool]] = {
    ".md": (_TEXT, True),  # Markdown is shown as its text: no HTML of the document's making is rendered
    ".markdown": (_TEXT, True),
    ".txt": (_TEXT, True),
    ".csv": (_TEXT, True),
    ".pdf": ("application/pdf", True),
    # HTML is rendered, but in the sandbox and with no scripts, frames, forms or outside requests.
    ".html": ("text/html; charset=utf-8", True),
    ".htm": ("text/html; charset=utf-8", True),
    ".docx": ("application/vnd.openxmlformats-officedocument.wordprocessingml.document", False),
    ".pptx": ("application/vnd.openxmlformats-officedocument.presentationml.presentation", False),
    ".xlsx": ("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", False),
    # Scanned pages (read by OCR): shown as the picture they are; browsers do not show TIFF.
    ".png": ("image/png", True),
    ".jpg": ("image/jpeg", True),
    ".jpeg": ("image/jpeg", True),
    ".tif": ("image/tiff", False),
    ".tiff": ("image/tiff", False),
}
_SANDBOX = "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'"


# May the user a link was made for ("" : anyone) open this indexed file? (access trimming)
MayOpen = Callable[[str, str], Awaitable[bool]]


async def _anyone(rel: str, user: str) -> bool:
    return True


class DocumentRoute:
    def __init__(
        self,
        docs_dir: Path,
        indexed_files: Callable[[], Collection[str]],
        links: DocLinks,
        may_open: MayOpen = _anyone,
    ) -> None:
        self._root = docs_dir.resolve()
        self._indexed = indexed_files  # read per request: the index loads after the server starts
        self._links = links
        self._may_open = may_open

    def register(self, app: web.Application) -> None:
        app.router.add_get("/docs/{path:.+}", self.handle)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        rel = request.match_info["path"]
        user = request.query.get("u", "")
        if not self._links.allows(rel, request.query.get("exp"), request.query.get("sig"), user):
            log.info("refused /docs/%r: missing, invalid or expired signature", rel)
            raise web.HTTPForbidden(text="this link is not valid or has expired; open the answer again")
        target = self._servable(rel)
        # A file its link's user may (no longer) read is "not found", as if it were not there.
        if target is None or not await self._may_open(rel, user):
            raise web.HTTPNotFound(text="document not found")
        kind, inline = _TYPES.get(target.suffix.lower(), ("application/octet-stream", False))
        headers = {
            "Content-Type": kind,
            "X-Content-Type-Options": "nosniff",
            # A signed link must not leak through the Referer header to a page the document links to.
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "private, no-store" if self._links.signed else "no-cache",
        }
        if kind != "application/pdf":
            headers["Content-Security-Policy"] = _SANDBOX
        if not inline:
            headers["Content-Disposition"] = f"attachment; filename*=UTF-8''{quote(target.name)}"
        return web.FileResponse(target, headers=headers)

    def _servable(self, rel: str) -> Path | None:
        """The file for `rel` if the index holds it and it is still a plain file inside the folder."""
        if not rel or any(ord(ch) < 32 or ch == "\x7f" for ch in rel) or "\\" in rel:
            return None  # a NUL would make the OS calls below raise; control characters name no document
        if rel not in self._indexed():
            return None
        path = self._root / rel
        # The indexer's own filter, checked again now: the file may have been swapped for a link.
        return path if is_indexable(path, self._root) else None
