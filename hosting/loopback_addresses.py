"""Loopback names and URLs: local mode (no app id) listens only on a loopback interface and replies
only to a loopback serviceUrl, so an unauthenticated caller can neither reach the bot from elsewhere
nor make it post its replies elsewhere (SSRF)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def is_loopback_host(name: str) -> bool:
    name = name.strip().strip("[]").rstrip(".").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def is_loopback_url(url: str) -> bool:
    """True for an http(s) URL whose host is localhost or a loopback address."""
    try:
        parts = urlsplit(url)
        name = parts.hostname
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(name) and is_loopback_host(name or "")
