"""HTTP(S)_PROXY and NO_PROXY for the aiohttp clients that post on every turn, looked up once per origin.

The SDKs these clients replace (httpx under openai, requests under msrest) honour the proxy variables,
which a company network may need. aiohttp does with `trust_env=True`, but then, for every request, it
reads ~/.netrc and the environment in worker threads (two thread hops a call, a tenth of the reply
path's time under bench/bench_load.py). The environment is read here once per origin instead, and the
session keeps trust_env off.
"""

from __future__ import annotations

import functools
from typing import Any

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL


def proxy_options(url: str) -> dict[str, Any]:
    """The `proxy` and `proxy_auth` arguments of a request to `url` (none when no proxy applies)."""
    parsed = URL(url)
    return dict(_for_origin(parsed.scheme, parsed.host or "", parsed.port))


@functools.lru_cache(maxsize=256)
def _for_origin(scheme: str, host: str, port: int | None) -> tuple[tuple[str, Any], ...]:
    try:
        proxy, auth = get_env_proxy_for_url(URL.build(scheme=scheme, host=host, port=port))
    except LookupError:  # NO_PROXY names the host, or no proxy for the scheme
        return ()
    options: list[tuple[str, Any]] = [("proxy", proxy)]
    if isinstance(auth, aiohttp.BasicAuth):
        options.append(("proxy_auth", auth))
    return tuple(options)


def forget() -> None:
    """Read the environment again at the next request (tests that change it)."""
    _for_origin.cache_clear()
