"""HTTP(S)_PROXY and NO_PROXY for the app's own aiohttp clients, read once when each client is made.

The SDKs these clients replace or sit beside (httpx under openai, requests under msrest) honour the
proxy variables, which a company network may need. aiohttp does with `trust_env=True`, but then, for
every request, it reads ~/.netrc and the environment in worker threads (two thread hops a call, a
tenth of the reply path's time under tools/bench/bench_load.py). Each client posts to one origin, so it
asks here once, keeps the answer, and its session keeps trust_env off.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL


def proxy_options(url: str) -> dict[str, Any]:
    """The `proxy` and `proxy_auth` arguments of requests to `url`'s origin (none when no proxy applies)."""
    try:
        proxy, auth = get_env_proxy_for_url(URL(url))
    except LookupError:  # NO_PROXY names the host, or no proxy for the scheme
        return {}
    options: dict[str, Any] = {"proxy": proxy}
    if isinstance(auth, aiohttp.BasicAuth):
        options["proxy_auth"] = auth
    return options
