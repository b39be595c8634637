"""The import graph follows the design: data flows app -> bot -> turn -> engine, then turn -> replies;
the engine package knows no app layer; retrieval (crag/search) never reaches into indexing
(crag/ingest), which writes what retrieval reads."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APP_LAYERS = ("app", "config", "bot", "turn", "replies", "cards", "webchat", "feedback", "support", "admin")


def imports_of(package: str) -> dict[str, set[str]]:
    """module path -> the modules it imports (absolute names, every `import` and `from` statement,
    including those inside functions)."""
    out: dict[str, set[str]] = {}
    base = ROOT / package
    files = [base.with_suffix(".py")] if base.with_suffix(".py").is_file() else sorted(base.rglob("*.py"))
    for path in files:
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
        out[path.relative_to(ROOT).as_posix()] = names
    return out


def arrows(source: str, targets: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{module} -> {name}"
        for module, names in imports_of(source).items()
        for name in names
        if any(name == t or name.startswith(t + ".") for t in targets)
    )


# `python -m crag.feedback` is only a second name for the feedback CLI: it imports the app layer's
# command and runs it; nothing in the engine imports it.
CLI_ALIASES = (
    "crag/feedback/__main__.py -> feedback.__main__",
    "crag/feedback/__main__.py -> feedback.__main__.main",
)


def test_the_engine_package_imports_no_app_layer() -> None:
    assert [a for a in arrows("crag", APP_LAYERS) if a not in CLI_ALIASES] == []
    assert not [a for a in arrows("crag", ("crag.feedback",)) if not a.startswith("crag/feedback/")]


def test_retrieval_does_not_import_indexing() -> None:
    assert arrows("crag/search", ("crag.ingest",)) == []


@pytest.mark.parametrize(
    ("layer", "above"),
    [
        ("turn", ("app", "bot", "webchat")),
        ("replies", ("app", "bot", "turn", "webchat")),
        ("cards", ("app", "bot", "turn", "replies", "webchat")),
        # Stores serve the dashboard as they serve the turn: they know neither.
        ("feedback", ("app", "bot", "turn", "webchat", "admin")),
    ],
)
def test_layers_do_not_import_the_layers_above_them(layer: str, above: tuple[str, ...]) -> None:
    assert arrows(layer, above) == []


def engine_calls(path: Path) -> int:
    """Calls of `<something named engine>.run(...)` in a file."""
    count = 0
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "run":
            target = node.func.value
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            count += "engine" in name
    return count


def test_turn_answer_is_the_only_app_code_that_runs_the_engine() -> None:
    files = [ROOT / "app.py", *(p for layer in APP_LAYERS[2:] for p in sorted((ROOT / layer).rglob("*.py")))]
    callers = {p.relative_to(ROOT).as_posix(): n for p in files if (n := engine_calls(p))}
    assert callers == {"turn/answer.py": 1}
    # ...and no app layer but the turn even imports the engine module.
    importers = [
        module
        for layer in ("app", "bot", "replies", "cards", "webchat")
        for module, names in imports_of(layer).items()
        if any(n == "crag.engine" or n.startswith("crag.engine.") for n in names)
    ]
    assert importers == []


def test_the_dialogs_package_is_gone() -> None:
    # The bot turn lives in turn/; a ComponentDialog came back only with real multi-turn work.
    assert not (ROOT / "dialogs").exists()
