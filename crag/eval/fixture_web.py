"""A SerpAPI stand-in on 127.0.0.1 that answers from recorded responses (web_fixtures.jsonl).

The engine rewrites questions before searching the web, so the query it sends rarely equals the
recorded question: the server answers with the fixture of the question being evaluated when the
harness has said which one (`current`), and otherwise with the fixture whose question shares the
most character bigrams with the query.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from aiohttp import web

from crag.eval.loopback import LoopbackServer


def _bigrams(text: str) -> set[str]:
    text = "".join(unicodedata.normalize("NFKC", text).lower().split())
    return {text[i : i + 2] for i in range(len(text) - 1)}


class FakeSerpApi(LoopbackServer):
    def __init__(self, fixtures: dict[str, dict[str, Any]]) -> None:
        super().__init__()
        self._fixtures = fixtures
        self._grams = {qid: _bigrams(str(f.get("question", ""))) for qid, f in fixtures.items()}
        self.current: str | None = None
        self.queries: list[str] = []

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/search", self._search)
        app.router.add_get("/search.json", self._search)

    def nearest(self, query: str) -> str | None:
        grams = _bigrams(query)
        best, best_score = None, 0.0
        for qid, g in self._grams.items():
            union = len(grams | g)
            score = len(grams & g) / union if union else 0.0
            if score > best_score:
                best, best_score = qid, score
        return best

    async def _search(self, request: web.Request) -> web.Response:
        query = request.query.get("q", "")
        self.queries.append(query)
        if not request.query.get("api_key"):
            return web.json_response({"error": "Invalid API key."}, status=401)
        qid = self.current if self.current in self._fixtures else self.nearest(query)
        if qid is None:
            return web.json_response({"error": "Google hasn't returned any results for this query."})
        return web.json_response(self._fixtures[qid]["serpapi"])
