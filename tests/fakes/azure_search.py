"""An Azure AI Search stand-in on 127.0.0.1 for tests: the REST calls the Python SDK makes, in memory.

Implements index create/update/get/delete (`PUT|GET|DELETE /indexes('NAME')`, `POST /indexes`),
search (`POST /indexes('NAME')/docs/search.post.search`), indexing (`POST .../docs/search.index`) and
the document count (`GET .../docs/$count`). Search is naive but shaped like the service's: a keyword
match over the searchable fields, cosine similarity for vector queries, reciprocal-rank fusion for
hybrid ones, a made-up `@search.rerankerScore` for semantic ones; OData filters (eq, ne, gt, ge, lt,
le, search.in, and, or, not, parentheses, and the collection lambdas `f/any(x: …)`, `f/all(x: …)`,
`f/any()`) over filterable fields only, applied before ranking and `top` as the service does (and
for vector queries too: its pre-filter mode); orderby, select, skip and top.

Every request needs the `api-key` header and an `api-version` parameter, and is recorded (method,
path, query, headers, JSON body) in `requests` so that tests can assert what the SDK sent.
`fail(status)` makes the next requests fail, `delay_s` slows every answer, `reject_keys` fails single
indexing actions (HTTP 207), and `max_request_bytes` answers 413 to larger bodies.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from aiohttp import web

from crag.eval.loopback import LoopbackServer

_INDEX_PATH = re.compile(r"^/indexes\('(?P<name>[^']+)'\)(?P<rest>/.*)?$")
_KEY = re.compile(r"^[A-Za-z0-9_\-=]{1,1024}$")
DEFAULT_TOP = 50


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    peer: Any = None  # the client's (host, port): the same port twice means a reused connection


class ODataError(ValueError):
    pass


class FakeAzureSearch(LoopbackServer):
    def __init__(self, api_key: str = "test-admin-key") -> None:
        super().__init__()
        self.api_key = api_key
        self.indexes: dict[str, dict[str, Any]] = {}
        self.documents: dict[str, dict[str, dict[str, Any]]] = {}
        self.requests: list[RecordedRequest] = []
        self.max_request_bytes: int | None = None
        self.delay_s = 0.0  # wait this long before answering
        self.reject_keys: set[str] = set()  # indexing actions on these keys fail (HTTP 207 overall)
        self._fail_status: int | None = None
        self._fail_times: int | None = None
        self._etag = 0
        # Entra: a bearer token this accepts (None: none). local_auth False is disableLocalAuth: the
        # service refuses api keys.
        self.bearer_check: Callable[[str], bool] | None = None
        self.local_auth = True

    # -- lifecycle ------------------------------------------------------------------------------
    client_max_size = 64 * 1024 * 1024

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{tail:.*}", self._dispatch)

    # -- test helpers ---------------------------------------------------------------------------
    def fail(self, status: int, times: int | None = None) -> None:
        """Answer the next `times` requests (all, when None) with this HTTP status."""
        self._fail_status, self._fail_times = status, times

    def calls(self, suffix: str, method: str = "POST") -> list[RecordedRequest]:
        return [r for r in self.requests if r.method == method and r.path.endswith(suffix)]

    def search_bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.calls("/docs/search.post.search")]

    def index_bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.calls("/docs/search.index")]

    def add_documents(self, index: str, docs: list[dict[str, Any]]) -> None:
        key = self._key_field(self.indexes[index])
        for doc in docs:
            self.documents[index][str(doc[key])] = dict(doc)

    # -- dispatch -------------------------------------------------------------------------------
    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self.requests.append(
            RecordedRequest(
                request.method, request.path, dict(request.query), dict(request.headers), body, peer
            )
        )
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if not self._authorized(request):
            return _error(403, "Forbidden", "Access denied: a valid api-key header is required.")
        if "api-version" not in request.query:
            return _error(400, "MissingApiVersionParameter", "The api-version query parameter is required.")
        if self._fail_status is not None and (self._fail_times is None or self._fail_times > 0):
            if self._fail_times is not None:
                self._fail_times -= 1
            return _error(self._fail_status, "ServiceUnavailable", "The service is temporarily unavailable.")
        if self.max_request_bytes is not None and len(raw) > self.max_request_bytes:
            return _error(413, "RequestEntityTooLarge", "The request is too large.")

        path = request.path
        if path.rstrip("/") == "/indexes" and request.method == "POST":
            return self._create_index(body)
        match = _INDEX_PATH.match(path)
        if match is None:
            return _error(404, "NotFound", f"No route for {request.method} {path}")
        name, rest = match.group("name"), match.group("rest") or ""
        try:
            if rest == "":
                if request.method == "PUT":
                    return self._put_index(name, body)
                if request.method == "GET":
                    return self._get_index(name)
                if request.method == "DELETE":
                    return self._delete_index(name)
            if name not in self.indexes:
                return _error(404, "ResourceNotFound", f"The index '{name}' was not found.")
            if rest == "/docs/search.post.search" and request.method == "POST":
                return self._search(name, body)
            if rest == "/docs/search.index" and request.method == "POST":
                return self._index(name, body)
            if rest == "/docs/$count" and request.method == "GET":
                return web.Response(text=str(len(self.documents[name])), content_type="text/plain")
        except ODataError as exc:
            return _error(400, "InvalidRequestParameter", str(exc))
        return _error(404, "NotFound", f"No route for {request.method} {path}")

    def _authorized(self, request: web.Request) -> bool:
        if "api-key" in request.headers:
            return self.local_auth and request.headers["api-key"] == self.api_key
        bearer = request.headers.get("Authorization", "")
        if self.bearer_check is None or not bearer.startswith("Bearer "):
            return False
        return self.bearer_check(bearer.removeprefix("Bearer "))

    # -- indexes --------------------------------------------------------------------------------
    def _create_index(self, body: Any) -> web.Response:
        name = body.get("name", "") if isinstance(body, dict) else ""
        if name in self.indexes:
            return _error(409, "ResourceNameAlreadyInUse", f"Index '{name}' already exists.")
        return self._put_index(name, body)

    def _put_index(self, name: str, body: Any) -> web.Response:
        if not isinstance(body, dict) or body.get("name") != name:
            return _error(400, "InvalidRequestParameter", "The index name in the body must match the URL.")
        problem = _validate_index(body)
        old = self.indexes.get(name)
        if old is not None and problem is None:
            problem = _incompatible_change(old, body)
        if problem:
            return _error(400, "InvalidRequestParameter", problem)
        self._etag += 1
        stored = {**body, "@odata.etag": f'"0x{self._etag:X}"'}
        self.indexes[name] = stored
        self.documents.setdefault(name, {})
        return web.json_response(stored, status=200 if old is not None else 201)

    def _get_index(self, name: str) -> web.Response:
        if name not in self.indexes:
            return _error(404, "ResourceNotFound", f"The index '{name}' was not found.")
        return web.json_response(self.indexes[name])

    def _delete_index(self, name: str) -> web.Response:
        if name not in self.indexes:
            return _error(404, "ResourceNotFound", f"The index '{name}' was not found.")
        del self.indexes[name]
        self.documents.pop(name, None)
        return web.Response(status=204)

    @staticmethod
    def _key_field(index: dict[str, Any]) -> str:
        return str(next(f["name"] for f in index["fields"] if f.get("key")))

    # -- indexing -------------------------------------------------------------------------------
    def _index(self, name: str, body: Any) -> web.Response:
        index = self.indexes[name]
        fields = {f["name"]: f for f in index["fields"]}
        key_field = self._key_field(index)
        actions = body.get("value") if isinstance(body, dict) else None
        if not isinstance(actions, list) or not actions:
            return _error(400, "InvalidRequestParameter", "The request has no actions.")
        if len(actions) > 1000:
            return _error(400, "InvalidRequestParameter", "A batch may hold at most 1000 actions.")
        for action in actions:
            for prop, value in action.items():
                if prop == "@search.action":
                    continue
                if prop not in fields:
                    return _error(
                        400,
                        "InvalidRequestParameter",
                        f"The property '{prop}' does not exist on type 'search.documentFields'.",
                    )
                dims = fields[prop].get("dimensions")
                if dims and value is not None and len(value) != dims:
                    return _error(
                        400,
                        "InvalidRequestParameter",
                        f"The vector field '{prop}' must have {dims} dimensions.",
                    )
        docs = self.documents[name]
        results = []
        for action in actions:
            kind = action.get("@search.action", "upload")
            key = action.get(key_field)
            values = {k: v for k, v in action.items() if k != "@search.action"}
            if not isinstance(key, str) or not _KEY.match(key):
                results.append(_result(str(key), False, 400, "Invalid document key."))
            elif key in self.reject_keys:
                results.append(_result(key, False, 422, "The document could not be indexed."))
            elif kind == "delete":
                docs.pop(key, None)
                results.append(_result(key, True, 200))
            elif kind == "upload":
                docs[key] = values
                results.append(_result(key, True, 201))
            elif kind in ("merge", "mergeOrUpload"):
                if key in docs:
                    docs[key].update(values)
                    results.append(_result(key, True, 200))
                elif kind == "merge":
                    results.append(_result(key, False, 404, "Document not found."))
                else:
                    docs[key] = values
                    results.append(_result(key, True, 201))
            else:
                return _error(400, "InvalidRequestParameter", f"Unknown action {kind!r}.")
        status = 200 if all(r["status"] for r in results) else 207
        return web.json_response({"value": results}, status=status)

    # -- search ---------------------------------------------------------------------------------
    def _search(self, name: str, body: Any) -> web.Response:
        if not isinstance(body, dict):
            body = {}
        index = self.indexes[name]
        fields = {f["name"]: f for f in index["fields"]}
        key_field = self._key_field(index)
        docs = list(self.documents[name].values())
        if body.get("filter"):
            predicate = parse_filter(body["filter"], fields)
            docs = [d for d in docs if predicate(d)]

        text = body.get("search")
        text_scores: dict[str, float] | None = None
        if text not in (None, "", "*"):
            search_fields = _split(body.get("searchFields")) or [
                n for n, f in fields.items() if f.get("searchable") and not f.get("dimensions")
            ]
            terms = [t.lower() for t in re.findall(r"\w+", text)]
            text_scores = {}
            for d in docs:
                haystack = " ".join(_as_text(d.get(f)) for f in search_fields).lower()
                score = float(sum(haystack.count(t) for t in terms))
                if score > 0:
                    text_scores[d[key_field]] = score

        vector_ranks: list[dict[str, float]] = []
        for vq in body.get("vectorQueries") or []:
            if vq.get("kind") != "vector":
                raise ODataError(f"Unsupported vector query kind {vq.get('kind')!r}.")
            field_name = vq.get("fields", "")
            field = fields.get(field_name)
            if field is None or not field.get("dimensions"):
                raise ODataError(f"The field '{field_name}' is not a vector field.")
            vector = vq.get("vector") or []
            if len(vector) != field["dimensions"]:
                raise ODataError(f"The vector query must have {field['dimensions']} dimensions.")
            sims = {
                d[key_field]: (1.0 + _cosine(vector, d[field_name])) / 2.0
                for d in docs
                if d.get(field_name) is not None
            }
            best = sorted(sims.items(), key=lambda kv: (-kv[1], kv[0]))[: int(vq.get("k") or DEFAULT_TOP)]
            vector_ranks.append(dict(best))

        if text_scores is None and not vector_ranks:
            scores = {d[key_field]: 1.0 for d in docs}
        elif text_scores is not None and not vector_ranks:
            scores = text_scores
        elif text_scores is None and len(vector_ranks) == 1:
            scores = vector_ranks[0]
        else:  # reciprocal rank fusion, as the service does for hybrid queries
            lists = [*([text_scores] if text_scores is not None else []), *vector_ranks]
            scores = {}
            for ranking in lists:
                ordered = sorted(ranking.items(), key=lambda kv: (-kv[1], kv[0]))
                for rank, (key, _) in enumerate(ordered, start=1):
                    scores[key] = scores.get(key, 0.0) + 1.0 / (60 + rank)

        by_key = {d[key_field]: d for d in docs}
        hits = [(by_key[k], s) for k, s in scores.items() if k in by_key]
        order = _split(body.get("orderby"))
        if order:
            for clause in reversed(order):
                parts = clause.split()
                desc = len(parts) > 1 and parts[1].lower() == "desc"
                name = parts[0]
                hits.sort(key=lambda h: _sort_key(h[0].get(name)), reverse=desc)
        else:
            hits.sort(key=lambda h: (-h[1], str(h[0][key_field])))

        reranker: dict[str, float] = {}
        if body.get("queryType") == "semantic":
            config = body.get("semanticConfiguration") or (index.get("semantic") or {}).get(
                "defaultConfiguration"
            )
            known = [c["name"] for c in (index.get("semantic") or {}).get("configurations") or []]
            if config not in known:
                raise ODataError(f"Unknown semantic configuration {config!r}.")
            semantic_text = body.get("semanticQuery") or (text if text not in (None, "*") else "")
            if not semantic_text:
                raise ODataError("A semantic query needs search text or semanticQuery.")
            wanted = {t.lower() for t in re.findall(r"\w+", semantic_text)}
            hits = hits[:50]
            for doc, _ in hits:
                words = " ".join(_as_text(v) for v in doc.values()).lower()
                reranker[doc[key_field]] = round(
                    4.0 * sum(t in words for t in wanted) / max(1, len(wanted)), 4
                )
            hits.sort(key=lambda h: (-reranker[h[0][key_field]], -h[1]))

        skip = int(body.get("skip") or 0)
        top = body.get("top")
        top = DEFAULT_TOP if top is None else int(top)
        page = hits[skip : skip + min(top, 1000)]
        select = _split(body.get("select"))
        hidden = {n for n, f in fields.items() if f.get("retrievable") is False}
        out = []
        for doc, score in page:
            names = select or [n for n in fields if n not in hidden]
            item = {n: doc.get(n) for n in names if n not in hidden}
            item["@search.score"] = score
            if reranker:
                item["@search.rerankerScore"] = reranker[doc[key_field]]
            out.append(item)
        response: dict[str, Any] = {"value": out}
        if body.get("count"):
            response["@odata.count"] = len(hits)
        return web.json_response(response)


# -- helpers ------------------------------------------------------------------------------------
def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status)


def _result(key: str, ok: bool, status: int, message: str | None = None) -> dict[str, Any]:
    return {"key": key, "status": ok, "errorMessage": message, "statusCode": status}


def _split(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]
    return [v.strip() for v in str(value or "").split(",") if v.strip()]


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return " ".join(_as_text(v) for v in value)
    return str(value)


def _sort_key(value: Any) -> tuple[int, Any]:
    return (0, "") if value is None else (1, value)


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def _validate_index(body: dict[str, Any]) -> str | None:
    fields = body.get("fields") or []
    keys = [f for f in fields if f.get("key")]
    if len(keys) != 1 or keys[0].get("type") != "Edm.String":
        return "An index needs exactly one key field of type Edm.String."
    names = [f.get("name") for f in fields]
    if len(set(names)) != len(names):
        return "Field names must be unique."
    vector = body.get("vectorSearch") or {}
    algorithms = {a.get("name") for a in vector.get("algorithms") or []}
    profiles = {p.get("name"): p for p in vector.get("profiles") or []}
    for p in profiles.values():
        if p.get("algorithm") not in algorithms:
            return f"Vector profile '{p.get('name')}' names an unknown algorithm."
    for f in fields:
        if f.get("type") == "Collection(Edm.Single)":
            if not f.get("dimensions") or f.get("vectorSearchProfile") not in profiles:
                return f"Vector field '{f.get('name')}' needs dimensions and a known vectorSearchProfile."
            if not f.get("searchable"):
                return f"Vector field '{f.get('name')}' must be searchable."
    for config in (body.get("semantic") or {}).get("configurations") or []:
        prioritized = config.get("prioritizedFields") or {}
        used = [
            *([prioritized["titleField"]] if prioritized.get("titleField") else []),
            *(prioritized.get("prioritizedContentFields") or []),
            *(prioritized.get("prioritizedKeywordsFields") or []),
        ]
        for item in used:
            if item.get("fieldName") not in names:
                return f"Semantic configuration '{config.get('name')}' names an unknown field."
    return None


def _incompatible_change(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    before = {f["name"]: f for f in old.get("fields") or []}
    after = {f["name"]: f for f in new.get("fields") or []}
    for name, f in before.items():
        if name not in after:
            return f"Existing field '{name}' cannot be removed."
        for attr in ("type", "key", "analyzer", "dimensions"):
            if f.get(attr) != after[name].get(attr):
                return f"Existing field '{name}' cannot change its '{attr}'."
    return None


# -- OData filters ----------------------------------------------------------------------------
_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?)|(?P<punct>[(),/:])|(?P<word>[A-Za-z_][\w.]*))"
)
Predicate = Callable[[dict[str, Any]], bool]


def parse_filter(text: str, fields: dict[str, dict[str, Any]] | None = None) -> Predicate:
    """A predicate over documents for an OData filter. With the index's `fields`, as the service:
    only filterable fields may be named, and a collection only through any/all."""
    tokens: list[tuple[str, Any]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ODataError(f"Invalid expression at position {pos} of the filter.")
        pos = m.end()
        if m.group("str") is not None:
            tokens.append(("str", m.group("str")[1:-1].replace("''", "'")))
        elif m.group("num") is not None:
            tokens.append(("num", float(m.group("num"))))
        elif m.group("punct") is not None:
            tokens.append(("punct", m.group("punct")))
        elif m.group("word") is not None:
            tokens.append(("word", m.group("word")))
    parser = _FilterParser(tokens, fields)
    predicate = parser.expr()
    if parser.i != len(tokens):
        raise ODataError("Unexpected text at the end of the filter.")
    return predicate


class _FilterParser:
    _OPS: ClassVar[dict[str, Callable[[Any, Any], bool]]] = {
        "eq": lambda a, b: a == b,
        "ne": lambda a, b: a != b,
        "gt": lambda a, b: a is not None and b is not None and a > b,
        "ge": lambda a, b: a is not None and b is not None and a >= b,
        "lt": lambda a, b: a is not None and b is not None and a < b,
        "le": lambda a, b: a is not None and b is not None and a <= b,
    }

    def __init__(self, tokens: list[tuple[str, Any]], fields: dict[str, dict[str, Any]] | None) -> None:
        self.tokens = tokens
        self.i = 0
        self.fields = fields
        self.variables: set[str] = set()  # lambda range variables in scope

    def check_field(self, name: str, collection: bool = False) -> None:
        if self.fields is None or name in self.variables:
            return
        field = self.fields.get(name)
        if field is None:
            raise ODataError(f"Invalid expression: Could not find a property named '{name}'.")
        if not field.get("filterable"):
            raise ODataError(f"Invalid expression: '{name}' is not a filterable field.")
        is_collection = str(field.get("type", "")).startswith("Collection(")
        if is_collection and not collection:
            raise ODataError(
                f"Invalid expression: the collection '{name}' can only be filtered with any/all."
            )
        if collection and not is_collection:
            raise ODataError(f"Invalid expression: any/all apply to collections, and '{name}' is not one.")

    def peek(self) -> tuple[str, Any] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, kind: str | None = None, value: Any = None) -> tuple[str, Any]:
        token = self.peek()
        if token is None or (kind and token[0] != kind) or (value is not None and token[1] != value):
            raise ODataError(f"Invalid filter: expected {value or kind}, found {token}.")
        self.i += 1
        return token

    def keyword(self, word: str) -> bool:
        token = self.peek()
        if token is not None and token[0] == "word" and token[1].lower() == word:
            self.i += 1
            return True
        return False

    def expr(self) -> Predicate:
        left = self.conjunction()
        while self.keyword("or"):
            right = self.conjunction()
            left = (lambda a, b: lambda d: a(d) or b(d))(left, right)
        return left

    def conjunction(self) -> Predicate:
        left = self.unary()
        while self.keyword("and"):
            right = self.unary()
            left = (lambda a, b: lambda d: a(d) and b(d))(left, right)
        return left

    def unary(self) -> Predicate:
        if self.keyword("not"):
            inner = self.unary()
            return lambda d: not inner(d)
        token = self.peek()
        if token == ("punct", "("):
            self.take()
            inner = self.expr()
            self.take("punct", ")")
            return inner
        field = self.take("word")[1]
        if field.lower() == "search.in":
            return self.search_in()
        if self.peek() == ("punct", "/"):
            return self.collection(field)
        self.check_field(field)
        op = self.take("word")[1].lower()
        if op not in self._OPS:
            raise ODataError(f"Unsupported operator {op!r}.")
        value = self.literal()
        compare = self._OPS[op]
        return lambda d: bool(compare(d.get(field), value))

    def collection(self, field: str) -> Predicate:
        """`field/any()` (not empty), `field/any(x: expr)` and `field/all(x: expr)`."""
        self.take("punct", "/")
        kind = self.take("word")[1].lower()
        if kind not in ("any", "all"):
            raise ODataError(f"Invalid expression: unknown collection operator {kind!r}.")
        self.check_field(field, collection=True)
        self.take("punct", "(")
        if self.peek() == ("punct", ")"):
            self.take()
            if kind == "all":
                raise ODataError("Invalid expression: all needs a lambda expression.")
            return lambda d: bool(d.get(field))
        variable = self.take("word")[1]
        self.take("punct", ":")
        self.variables.add(variable)
        inner = self.expr()
        self.variables.discard(variable)
        self.take("punct", ")")
        test = any if kind == "any" else all
        return lambda d: test(inner({**d, variable: v}) for v in d.get(field) or [])

    def search_in(self) -> Predicate:
        self.take("punct", "(")
        field = self.take("word")[1]
        self.check_field(field)
        self.take("punct", ",")
        values = self.take("str")[1]
        delimiters = " ,"
        if self.peek() == ("punct", ","):
            self.take()
            delimiters = self.take("str")[1]
        self.take("punct", ")")
        allowed = {v for v in re.split("|".join(map(re.escape, delimiters)), values) if v}
        return lambda d: d.get(field) in allowed

    def literal(self) -> Any:
        kind, value = self.take()
        if kind in ("str", "num"):
            return value
        if kind == "word" and value.lower() in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[value.lower()]
        raise ODataError(f"Invalid literal {value!r} in the filter.")
