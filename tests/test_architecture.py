"""The import graph is the architecture: every allowed direction is listed here, each one is used, and
they all point down.

Data flows app -> bot -> dialogs (the turn) -> crag, then dialogs -> cards -> send. The faces (bot,
webchat, admin) never import one another; cards read only the engine's result models (crag.core);
hosting holds what the faces share, feedback the ratings store. Inside the engine library `crag`,
floors only point down, and crag imports nothing outside itself. Removing any allowed direction
below makes the first test fail (the direction is used); adding an import that is not listed
makes it fail too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

from tests.paths import ROOT

# The app's parts and what each may import (besides itself and third-party packages).
APP: dict[str, set[str]] = {
    "app": {"bot", "webchat", "admin", "hosting", "feedback", "crag"},  # the entry point: wiring only
    "bot": {"dialogs", "cards", "hosting", "feedback", "crag"},  # the Bot Framework face
    "webchat": {"hosting", "crag"},  # the Web Chat face (a Direct Line of its own)
    "admin": {"hosting", "feedback", "crag"},  # the admin dashboard face
    "dialogs": {"cards", "hosting", "feedback", "crag"},  # the turn: the engine, then the cards
    "cards": {"hosting", "crag"},  # every reply the user sees
    "feedback": {"hosting", "crag"},  # the ratings store and its command line
    "hosting": {"crag"},  # settings, texts, links, workers, limits: what the faces share
    "crag": set(),  # the engine library
}

# The engine's floors, top to bottom, and what each may import (besides itself).
CRAG: dict[str, set[str]] = {
    "cli": {"eval", "runtime", "ingest", "retrieval", "providers", "config"},
    "eval": {"runtime", "providers", "config", "core"},
    "runtime": {
        *("engine", "stages", "ingest", "retrieval", "providers"),
        *("access", "cache", "tracing", "text", "config", "core"),
    },
    "engine": {"cache", "tracing", "outbound", "text", "core"},
    # The reading grader runs its model on the embedding engine (crag/retrieval/embed).
    "stages": {"retrieval", "providers", "tracing", "text", "core"},
    # Entra sign-in to Search and Blob without keys is crag/outbound/entra_tokens.py's.
    "ingest": {"retrieval", "providers", "access", "outbound", "text", "config", "core"},
    "retrieval": {"providers", "outbound", "text", "config", "core"},
    "providers": {"tracing", "outbound", "text", "config", "core"},
    "access": {"core"},
    "cache": {"outbound", "core"},
    "tracing": {"config", "core"},
    "outbound": set(),
    "text": {"config", "core"},
    "config": {"core"},
    "core": set(),
}

# What cards may read of the engine: its result models and link safety, nothing that runs.
CARDS_MAY_READ = ("crag.core",)
FIRST_PARTY = set(APP) | {"tests", "tools"}


def modules(unit: str) -> Iterator[Path]:
    single = ROOT / f"{unit}.py"
    yield from [single] if single.is_file() else sorted((ROOT / unit).rglob("*.py"))


def imported(path: Path, root: Path = ROOT) -> set[str]:
    """Every absolute module name a file imports, inside functions too (relative imports resolved)."""
    package = path.relative_to(root).with_suffix("").parts[:-1]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def crag_floor(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "crag"


def edges() -> dict[tuple[str, str], list[str]]:
    """(from, to) -> the files that import that way: app parts by top-level name, crag by floor."""
    found: dict[tuple[str, str], list[str]] = {}
    for unit in APP:
        for path in modules(unit):
            rel = path.relative_to(ROOT).as_posix()
            for name in imported(path):
                top = name.split(".")[0]
                if top not in FIRST_PARTY:
                    continue
                if unit == "crag" and top == "crag":
                    a = crag_floor(".".join(path.relative_to(ROOT).with_suffix("").parts))
                    b = crag_floor(name)
                    if b in CRAG and a != b:
                        found.setdefault((f"crag.{a}", f"crag.{b}"), []).append(rel)
                    continue
                if top != unit:
                    found.setdefault((unit, top), []).append(rel)
    return found


def allowed() -> set[tuple[str, str]]:
    return {(a, b) for a, bs in APP.items() for b in bs} | {
        (f"crag.{a}", f"crag.{b}") for a, bs in CRAG.items() for b in bs
    }


def test_every_import_direction_is_allowed_and_every_allowed_one_is_used() -> None:
    found = edges()
    upward = {f"{a} -> {b}": sorted(set(files)) for (a, b), files in found.items() if (a, b) not in allowed()}
    assert upward == {}, "imports against the floors"
    unused = sorted(f"{a} -> {b}" for a, b in allowed() - set(found))
    assert unused == [], "allowed directions nothing uses: take them off the list"


@pytest.mark.parametrize("graph", [APP, CRAG], ids=["app", "crag"])
def test_the_floors_point_down(graph: dict[str, set[str]]) -> None:
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as exc:  # pragma: no cover - the message names the loop
        pytest.fail(f"the allowed directions form a loop: {exc.args[1]}")
    assert set(order) == set(graph)
    # Listed top to bottom: each part imports only parts listed after it.
    names = list(graph)
    assert all(names.index(b) > names.index(a) for a, bs in graph.items() for b in bs)


def test_every_engine_module_sits_on_a_floor() -> None:
    loose = [p.name for p in (ROOT / "crag").glob("*.py") if p.stem not in ("__init__", "engine")]
    floors = {p.name for p in (ROOT / "crag").iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert loose == [] and floors == set(CRAG) - {"engine"}


def test_cards_read_only_the_engines_result_models() -> None:
    reads = {
        name
        for path in modules("cards")
        for name in imported(path)
        if name.split(".")[0] == "crag" and not name.startswith(CARDS_MAY_READ)
    }
    assert reads == set()


def engine_calls(path: Path) -> int:
    """Calls of `<something named engine>.run(...)` in a file."""
    count = 0
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "run":
            target = node.func.value
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            count += "engine" in name
    return count


def test_the_dialog_is_the_only_app_code_that_runs_the_engine() -> None:
    files = [p for unit in APP if unit != "crag" for p in modules(unit)]
    callers = {p.relative_to(ROOT).as_posix(): n for p in files if (n := engine_calls(p))}
    assert callers == {"dialogs/answer.py": 1}
    importers = [
        p.relative_to(ROOT).as_posix()
        for unit in ("app", "bot", "cards", "webchat", "admin")
        for p in modules(unit)
        if any(n == "crag.engine" or n.startswith("crag.engine.") for n in imported(p))
    ]
    assert importers == []


def test_embeddings_sit_under_search_and_search_never_reaches_into_indexing() -> None:
    embed_reads = {n for p in (ROOT / "crag/retrieval/embed").rglob("*.py") for n in imported(p)}
    search_reads = {n for p in (ROOT / "crag/retrieval/search").rglob("*.py") for n in imported(p)}
    assert not [n for n in embed_reads if n.startswith("crag.retrieval.search")]
    assert any(n.startswith("crag.retrieval.embed") for n in search_reads)
    assert not [n for n in search_reads if n.startswith("crag.ingest")]
