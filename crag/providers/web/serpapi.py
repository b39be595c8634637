"""Web search through SerpAPI's Google engine (`GET /search?engine=google&output=json`).

The request is the one the `google-search-results` client makes, sent over one aiohttp session: that
client is synchronous (requests), so each search held a worker thread, and it opened a new TLS
connection to serpapi.com for every search, a handshake on every web branch; here connections are
kept and reused, and a search costs the event loop no thread. The API key travels in the query
string, and client libraries put the full URL into some exception messages, so no exception text
is ever logged or shown: only its class name. Failures never fail the turn: they come back as
WebOutcome(status=FAILED) and the card says web search failed.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import aiohttp
from pydantic import SecretStr

from crag.config.engine_settings import CragSettings
from crag.core.models import WebOutcome, WebResult, WebStatus
from crag.core.safe_links import safe_url
from crag.outbound.http_proxy import proxy_options
from crag.text.lang import detect_language

log = logging.getLogger(__name__)
DEFAULT_BASE_URL = "https://serpapi.com"


class SerpApiSearch:
    name = "serpapi"

    def __init__(self, api_key: SecretStr, base_url: str = "", timeout_s: float = 5.0) -> None:
        self._key = api_key
        self._url = (base_url.rstrip("/") or DEFAULT_BASE_URL) + "/search"
        self._timeout = timeout_s
        self._session: aiohttp.ClientSession | None = None  # made on the first search (needs a loop)
        self._proxy = proxy_options(self._url)  # HTTP(S)_PROXY and NO_PROXY, as with the SDK clients

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def search(self, query: str, num: int) -> WebOutcome:
        params = {
            "engine": "google",
            "q": query,
            "num": str(num),
            "api_key": self._key.get_secret_value(),
            "output": "json",
        }
        if detect_language(query) == "ja":
            params.update(hl="ja", gl="jp", google_domain="google.co.jp")
        try:
            status, body = await self._fetch(params)
        except TimeoutError:
            log.warning("web search timed out after %.1fs", self._timeout)
            return _failed("Web search timed out.")
        except Exception as exc:  # messages may hold the URL, and so the key: class name only
            log.warning("web search failed: %s", exc.__class__.__name__)
            return _failed("Web search is unavailable.")
        return self._parse(status, body, num)

    async def _fetch(self, params: dict[str, str]) -> tuple[int, str]:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._timeout))
        async with self._session.get(self._url, params=params, **self._proxy) as response:
            return response.status, await response.text()

    def _parse(self, status: int, body: str, num: int) -> WebOutcome:
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if isinstance(data, dict) and data.get("error"):
            # SerpAPI explains itself (bad key, quota, no results) in an "error" field.
            detail = str(data["error"])[:200]
            if "hasn't returned any results" in detail:
                return WebOutcome(status=WebStatus.OK, results=[])
            log.warning("web search error (HTTP %d): %s", status, detail)
            return _failed("Web search returned an error.")
        if status >= 400 or not isinstance(data, dict):
            log.warning("web search failed with HTTP %d", status)
            return _failed(f"Web search failed (HTTP {status}).")
        return WebOutcome(status=WebStatus.OK, results=parse_results(data, num))


def parse_results(data: dict[str, Any], num: int) -> list[WebResult]:
    results: list[WebResult] = []
    box = data.get("answer_box")
    if isinstance(box, dict):
        text = box.get("answer") or box.get("snippet") or box.get("result")
        if not text and isinstance(box.get("list"), list):
            text = " / ".join(str(x) for x in box["list"])
        if text:
            results.append(
                WebResult(
                    kind="answer_box",
                    title=str(box.get("title") or "Answer"),
                    url=safe_url(str(box.get("link") or "")),
                    snippet=str(text),
                )
            )
    for item in (data.get("organic_results") or [])[:num]:
        # A result whose link is not http(s) (javascript:, data:) is not a web page: left out.
        url = safe_url(str(item.get("link") or "")) if isinstance(item, dict) else ""
        if isinstance(item, dict) and url:
            results.append(
                WebResult(
                    title=str(item.get("title") or url),
                    url=url,
                    snippet=str(item.get("snippet") or ""),
                )
            )
    for item in (data.get("related_questions") or [])[:3]:
        if isinstance(item, dict) and item.get("snippet"):
            results.append(
                WebResult(
                    kind="related_question",
                    title=str(item.get("question") or item.get("title") or ""),
                    url=safe_url(str(item.get("link") or "")),
                    snippet=str(item["snippet"]),
                )
            )
    return results


def _failed(message: str) -> WebOutcome:
    return WebOutcome(status=WebStatus.FAILED, message=message)


# -- as a web search provider (registered in crag/providers/web/__init__.py) --------------------------------
def configured(settings: CragSettings) -> bool:
    return settings.serpapi.configured


def build(settings: CragSettings) -> SerpApiSearch:
    serp = settings.serpapi
    return SerpApiSearch(serp.api_key, serp.base_url, serp.timeout)
