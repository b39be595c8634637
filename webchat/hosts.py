"""Local mode (no app id) is a loopback tool: the Host names it answers. (The serviceUrls it replies
to and the interfaces it listens on: hosting/loopback_addresses.py.)

A page on any site can make a browser send requests to 127.0.0.1 under a name of its own that resolves
there (DNS rebinding): the Host header then carries that name. Answering only IP literals, "localhost"
and configured names keeps such a page from reading the bot's answers (tokens, documents).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware


def _hostname(netloc: str) -> str | None:
    """The host part of "name:port" / "[v6]:port", lower-case and without a trailing dot."""
    try:
        name = urlsplit("//" + netloc).hostname
    except ValueError:
        return None
    return name.rstrip(".") if name else None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostCheck:
    """Answers 403 to a request whose Host names something other than an IP address, localhost or
    one of `names` (e.g. PUBLIC_BASE_URL's host and CRAG_ALLOWED_HOSTS)."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = frozenset(n for n in (_hostname(x.strip()) for x in names if x.strip()) if n)

    def allows(self, host_header: str | None) -> bool:
        if host_header is None:
            return True  # HTTP/1.0 without Host: not a browser, so not DNS rebinding
        name = _hostname(host_header)
        if not name:
            return False
        return name == "localhost" or _is_ip(name) or name in self.names

    def middleware(self) -> Middleware:
        @web.middleware
        async def check_host(request: web.Request, handler: Handler) -> web.StreamResponse:
            if not self.allows(request.headers.get("Host")):
                return web.json_response(
                    {"error": "this Host is not allowed (see CRAG_ALLOWED_HOSTS)"}, status=403
                )
            return await handler(request)

        return check_host
