"""The check every endpoint setting makes: an http(s) URL, kept without surrounding spaces or a
trailing slash (the clients add their paths after it)."""

from __future__ import annotations

import re

_HTTP_URL = re.compile(r"^https?://[^/\s]+")


def endpoint_url(value: str, error: str, *, required: bool) -> str:
    """value stripped of spaces and trailing slashes; ValueError(error) when it is not an http(s) URL.
    required=False lets "" through: the service is simply not configured."""
    value = value.strip().rstrip("/")
    if (value or required) and not _HTTP_URL.match(value):
        raise ValueError(error)
    return value
