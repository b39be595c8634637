"""The checks of one recorded web search (a row of web_fixtures.jsonl) against its question.

The fake SerpAPI (crag/eval/fixture_web.py) serves these rows as Google results: three organic
results on Wikipedia or reserved *.example.com hosts, none of which may read as the company's own
rule (its names and systems, the set's company_markers).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

RESULT_FIELDS = frozenset({"position", "title", "link", "displayed_link", "source", "snippet"})
TEXT_FIELDS = ("title", "link", "snippet")  # what the host and marker checks read
WIKIPEDIA = ("ja.wikipedia.org", "en.wikipedia.org")


def organic_results(fixture: dict[str, Any] | None) -> list[Any]:
    """The fixture's organic results ([] when there is no fixture or they are not a list)."""
    serpapi = (fixture or {}).get("serpapi")
    results = serpapi.get("organic_results", []) if isinstance(serpapi, dict) else []
    return results if isinstance(results, list) else []


def fixture_problems(q: dict[str, Any], fixture: dict[str, Any], markers: tuple[str, ...]) -> Iterator[str]:
    where, lang = q["id"], q["lang"]
    serpapi = fixture.get("serpapi")
    serpapi = serpapi if isinstance(serpapi, dict) else {}
    if fixture.get("question") != q["question"]:
        yield f"{where}: fixture question differs"
    if serpapi.get("search_metadata") != {"id": f"fixture-{where}", "status": "Success"}:
        yield f"{where}: fixture search_metadata wrong"
    want_params = {
        "engine": "google",
        "q": q["question"],
        "hl": lang,
        "gl": "jp" if lang == "ja" else "us",
        "google_domain": "google.co.jp" if lang == "ja" else "google.com",
    }
    if serpapi.get("search_parameters") != want_params:
        yield f"{where}: fixture search_parameters wrong"
    if serpapi.get("related_questions") != []:
        yield f"{where}: related_questions must be []"
    results = organic_results(fixture)
    if [r.get("position") if isinstance(r, dict) else None for r in results] != [1, 2, 3]:
        yield f"{where}: fixture must have organic results at positions 1, 2, 3"
    for r in results:
        yield from _result_problems(where, r, markers)


def _result_problems(where: str, r: Any, markers: tuple[str, ...]) -> Iterator[str]:
    if not isinstance(r, dict):
        yield f"{where}: web result {r!r} is not an object"
        return
    if set(r) != RESULT_FIELDS or not all(isinstance(r[k], str) for k in TEXT_FIELDS):
        yield f"{where}: web result {r.get('position')} has fields {sorted(r)} (want {sorted(RESULT_FIELDS)})"
        return
    host = urlsplit(r["link"]).netloc
    if not (host in WIKIPEDIA or host.endswith(".example.com")):
        yield f"{where}: web result host {host!r} is neither Wikipedia nor *.example.com"
    blob = (r["title"] + " " + r["snippet"] + " " + r["link"]).lower()
    for marker in markers:
        if marker in blob:
            yield f"{where}: web result {r['position']} mentions {marker!r}"
