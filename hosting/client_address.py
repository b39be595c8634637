"""The client's address behind a reverse proxy (App Service, Front Door, a load balancer).

Rate limits and the admin sign-in lockout key on the client's address. Behind a proxy every request
comes from the proxy, so every user would share one bucket; X-Forwarded-For names the client, but any
client can write that header. It is believed only when the peer is one of CRAG_TRUSTED_PROXIES, and
then read from the right: each trusted hop is skipped, and the first address not trusted is the
client (addresses further left were written by that client and prove nothing). A malformed header
from a trusted proxy falls back to the proxy's own address.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

log = logging.getLogger(__name__)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
CLIENT_KEY = web.RequestKey("crag.client_address", str)


def parse_networks(entries: Iterable[str]) -> tuple[Network, ...]:
    """CRAG_TRUSTED_PROXIES' entries (addresses or CIDR ranges); ValueError names a bad one."""
    networks = []
    for entry in (e.strip() for e in entries):
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ValueError(f"CRAG_TRUSTED_PROXIES: {entry!r} is not an IP address or CIDR range") from None
    return tuple(networks)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _trusted(ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None, proxies: tuple[Network, ...]) -> bool:
    return ip is not None and any(ip in network for network in proxies)


def client_address(peer: str, forwarded_for: list[str], proxies: tuple[Network, ...]) -> str:
    """The client's address, given the TCP peer and the X-Forwarded-For header values in order."""
    if not _trusted(_address(peer), proxies):
        return peer
    hops = [hop.strip() for value in forwarded_for for hop in value.split(",")]
    for hop in reversed(hops):
        ip = _address(hop)
        if ip is None:
            return peer  # not an address: the header cannot be read, so it names no one
        if not _trusted(ip, proxies):
            return hop
    return hops[0] if hops and hops[0] else peer  # every hop a proxy: the first is the nearest we know


def middleware(proxies: tuple[Network, ...]) -> Middleware:
    """Stores each request's client address (client_of reads it) before any handler runs."""

    @web.middleware
    async def remember_client(request: web.Request, handler: Handler) -> web.StreamResponse:
        forwarded = request.headers.getall("X-Forwarded-For", [])
        request[CLIENT_KEY] = client_address(request.remote or "", forwarded, proxies)
        return await handler(request)

    return remember_client


def client_of(request: web.Request) -> str:
    """The client's address as the middleware found it (the TCP peer without the middleware)."""
    return request.get(CLIENT_KEY) or request.remote or ""
