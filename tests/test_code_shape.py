"""No function of the code is longer than MAX_LINES: a function that long does several jobs, and each
job reads better as a function of its own, named for what it does.

Counted over the Python files git tracks, outside tests/ and data/ (evaluation sets and what checks
them, not the application's code), from a function's `def` line to its last line (decorators not
counted, nested functions counted in their enclosing one too).
"""

from __future__ import annotations

import ast
import subprocess
from collections.abc import Iterator

from tests.test_architecture import ROOT

MAX_LINES = 80
NOT_SCANNED = ("tests/", "data/")
# Folders of installed packages, should any file in one ever be tracked.
INSTALLED = {".venv", "node_modules"}


def long_functions(source: str, name: str) -> Iterator[str]:
    """`file:line function (N lines)` for each function of the source longer than MAX_LINES."""
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_LINES:
                yield f"{name}:{node.lineno} {node.name} ({length} lines)"


def scanned_files() -> list[str]:
    tracked = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [
        file for file in tracked if not file.startswith(NOT_SCANNED) and not INSTALLED & set(file.split("/"))
    ]


def test_no_function_outside_the_tests_is_longer_than_80_lines() -> None:
    files = scanned_files()
    assert "crag/engine.py" in files and "tools/fit/fit_grader.py" in files  # the scan reaches the code
    offenders = [line for file in files for line in long_functions((ROOT / file).read_text("utf-8"), file)]
    assert not offenders, f"functions over {MAX_LINES} lines (split them into steps):\n" + "\n".join(
        offenders
    )


def _function(lines: int, indent: str = "") -> str:
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(lines - 2))
    return f"{indent}async def f():\n{body}{indent}    return None\n"


def test_the_measure_counts_from_def_to_last_line_methods_and_async_ones_too() -> None:
    assert list(long_functions(_function(MAX_LINES), "a.py")) == []
    assert list(long_functions(_function(MAX_LINES + 1), "a.py")) == [f"a.py:1 f ({MAX_LINES + 1} lines)"]
    method = "class A:\n" + _function(MAX_LINES + 1, indent="    ").replace("async def f()", "def f(self)")
    assert list(long_functions(method, "b.py")) == [f"b.py:2 f ({MAX_LINES + 1} lines)"]
