"""One name, one job: no package or module name stands at two places of the code with different jobs.

A reader who meets `runtime` or `settings` in an import should know which room it is without looking.
Names that recur on purpose, with the same job at each place, are listed below with that job; the
config/, cli/ and core/ floors of the engine name their modules for the subject they configure, run
or define (crag/config/llm.py configures crag/providers/llm/), so their module names are not counted.
"""

from __future__ import annotations

import subprocess
from collections import defaultdict
from pathlib import PurePosixPath

from tests.paths import ROOT

# Names kept at several places because each place does the same job for its own part.
SAME_JOB: dict[str, str] = {
    "llm": "the language-model implementation of a stage or an embedder (crag/providers/llm/ is its client)",
    "local": "the embedded implementation of a stage, a search, an embedder or a sync target",
    "azure": "the Azure implementation of a search or a sync target",
    "client": "a provider's HTTP client",
    "errors": "a face's or a provider's error types and messages",
    "page": "a face's HTML page",
}
# Floors whose modules are named for their subject, not their job (see the docstring).
SUBJECT_NAMED = {"crag/config", "crag/cli", "crag/core"}
CODE = (
    "app.py",
    "bot/",
    "dialogs/",
    "cards/",
    "webchat/",
    "admin/",
    "hosting/",
    "feedback/",
    "crag/",
    "tools/",
)


def names() -> dict[str, set[str]]:
    """Every package (folder) and module name of the code -> the places it stands."""
    tracked = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    places: dict[str, set[str]] = defaultdict(set)
    for file in tracked:
        if not file.startswith(CODE):
            continue
        path = PurePosixPath(file)
        for depth, folder in enumerate(path.parts[:-1], start=1):
            places[folder].add("/".join(path.parts[:depth]) + "/")
        if path.stem not in ("__init__", "__main__") and str(path.parent) not in SUBJECT_NAMED:
            places[path.stem].add(file)
    return places


def test_no_name_stands_at_two_places_with_different_jobs() -> None:
    clashes = {
        name: sorted(where) for name, where in names().items() if len(where) > 1 and name not in SAME_JOB
    }
    assert clashes == {}, "give each a name that says its job, or list it in SAME_JOB with the job"


def test_every_name_kept_on_purpose_still_recurs() -> None:
    found = names()
    stale = sorted(name for name in SAME_JOB if len(found.get(name, ())) < 2)
    assert stale == [], "no longer at two places: take it off SAME_JOB"


def test_the_names_that_once_meant_two_things_are_gone() -> None:
    # The rooms that had one name and two jobs: the Bicep's infra/ and the engine's plumbing, the app's
    # service/ and the engine's provider clients, two runtimes and two settings modules.
    found = names()
    assert "service" not in found and "services" not in found
    assert found.get("infra", set()) == set()  # infra/ is Bicep only: no Python under that name
    assert "runtime" in found and found["runtime"] == {"crag/runtime/"}
    assert "settings" not in found
