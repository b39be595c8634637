"""The README stays a newcomer's page, and no document or comment points outside the repository, or
at a test module that is not where it says."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.paths import ROOT

OUTSIDE = re.compile(r"\.\./shared|DESIGN(\.md| §)|\bseed 00\d")
TEST_FILE = re.compile(r"(?<![\w/.-])tests/[\w/.-]+\.py\b")


def tracked(*suffixes: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / f for f in out.split() if f.endswith(suffixes) and "/corpus/" not in f]


def test_the_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text("utf-8").splitlines()) <= 200


def test_nothing_points_outside_the_repository() -> None:
    this = Path(__file__).resolve()
    hits = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in tracked(".md", ".py", ".sh", ".toml")
        if path.resolve() != this
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert hits == []


def test_the_readmes_and_docs_links_resolve() -> None:
    broken = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text("utf-8")):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_every_test_file_named_is_there() -> None:
    # tests/ mirrors the code, so a test moves with what it tests: the docs and comments move with it.
    gone = [
        f"{path.relative_to(ROOT)}:{n}: {name}"
        for path in tracked(".md", ".py", ".sh", ".toml", ".txt")
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        for name in TEST_FILE.findall(line)
        if not (ROOT / name).is_file()
    ]
    assert gone == []
