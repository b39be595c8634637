"""bot/ in the Bot Framework shape: its top level is the ActivityHandler and what it holds; the SDK's
transport (channel/) and storage (state/) sit below it, and each of those modules opens by naming
the botbuilder 4.17 defect it works around and the test that shows it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.paths import ROOT

BOT = ROOT / "bot"

# The handler (crag_bot), its card actions and invokes, and what it holds (bot_runtime).
HANDLER = {"__init__", "crag_bot", "card_actions", "invokes", "bot_runtime"}
BELOW = {"channel", "state"}
# Modules below bot/ that name no defect, and why.
EXEMPT = {
    "bot/channel/__init__.py": "the package: its docstring says what the folder holds",
    "bot/state/__init__.py": "the package: its docstring says what the folder holds",
}
SDK_417 = re.compile(r"\b(botbuilder|botframework)(-[a-z]+)? 4\.17\b")
TEST_FILE = re.compile(r"\btests/[\w/]+\.py\b")
TEST_NAME = re.compile(r"\btest_\w+")


def below() -> list[Path]:
    return sorted(p for folder in BELOW for p in (BOT / folder).rglob("*.py"))


def work_arounds() -> list[Path]:
    return [p for p in below() if p.relative_to(ROOT).as_posix() not in EXEMPT]


def test_bots_top_level_is_the_handlers_modules_only() -> None:
    modules = {p.stem for p in BOT.glob("*.py")}
    folders = {p.name for p in BOT.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert modules == HANDLER
    assert folders == BELOW


def test_every_exemption_is_a_module_that_exists() -> None:
    assert {p.relative_to(ROOT).as_posix() for p in below()} >= set(EXEMPT)


@pytest.mark.parametrize("path", work_arounds(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_each_module_below_names_its_sdk_defect_and_the_test_that_shows_it(path: Path) -> None:
    rel = path.relative_to(ROOT).as_posix()
    doc = ast.get_docstring(ast.parse(path.read_text("utf-8"))) or ""
    opening = " ".join(doc.split("\n\n")[0].split())  # the first paragraph, on one line
    assert SDK_417.search(opening), f"{rel}: the first paragraph names no botbuilder/botframework 4.17"
    files = TEST_FILE.findall(opening)
    assert files, f"{rel}: the first paragraph names no tests/….py"
    # Every test file the docstring names exists, and every test it names is in one of them.
    named = set(TEST_FILE.findall(" ".join(doc.split())))
    assert all((ROOT / f).is_file() for f in named), named
    defined = {
        node.name
        for f in named
        for node in ast.walk(ast.parse((ROOT / f).read_text("utf-8")))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    mentioned = set(TEST_NAME.findall(TEST_FILE.sub("", doc)))
    assert mentioned <= defined, f"{rel}: tests it names that do not exist: {sorted(mentioned - defined)}"
