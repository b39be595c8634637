"""Schema invariants of the evaluation sets data/eval/sample-docs/ and data/eval/sample-docs-2/ (over
sample_docs/),
data/eval/fit-hokuyo/ and data/eval/fit-minami/ (the fitting sets) and data/eval/held-setouchi/ (a held-out
set), which have
corpora of their own.

Fast and offline: reads the JSONL files and the corpus, never runs the engine.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pytest

from crag.cli.eval import main
from crag.eval.dataset import load_dataset
from crag.eval.set_rules import IN_CORPUS_KINDS
from crag.eval.set_rules import KINDS as ALL_KINDS
from tests.paths import ROOT, SAMPLE_DOCS

KINDS = set(ALL_KINDS)
# Per set: its id prefix, its least number of questions and its kinds (sample-docs-2 and fit-hokuyo have no
# literal ones).
SETS = {
    "sample-docs": ("sd", 100, KINDS),
    "sample-docs-2": ("s2", 90, KINDS - {"literal"}),
    "fit-hokuyo": ("fh", 160, KINDS - {"literal"}),
    "fit-minami": ("fm", 160, KINDS - {"literal"}),
    "held-setouchi": ("hs", 160, KINDS),
}
# Sets whose corpus/ is a copy of sample_docs/; the others have twelve documents of their own.
SAMPLE_DOCS_COPIES = {"sample-docs", "sample-docs-2"}


def _norm(text: str) -> str:
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text)).lower()


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module", params=sorted(SETS))
def set_name(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture(scope="module")
def set_dir(set_name: str) -> Path:
    return ROOT / "data" / "eval" / set_name


@pytest.fixture(scope="module")
def questions(set_dir: Path) -> list[dict]:
    return _jsonl(set_dir / "questions.jsonl")


@pytest.fixture(scope="module")
def fixtures(set_dir: Path) -> dict[str, dict]:
    return {row["query_id"]: row for row in _jsonl(set_dir / "web_fixtures.jsonl")}


@pytest.fixture(scope="module")
def corpus(set_dir: Path) -> dict[str, str]:
    return {p.name: _norm(p.read_text("utf-8")) for p in (set_dir / "corpus").iterdir() if p.is_file()}


def test_corpus_is_a_copy_of_sample_docs_or_its_own(set_name: str, set_dir: Path) -> None:
    ours = {p.name: p.read_bytes() for p in (set_dir / "corpus").iterdir() if p.is_file()}
    theirs = {p.name: p.read_bytes() for p in SAMPLE_DOCS.iterdir() if p.is_file()}
    if set_name in SAMPLE_DOCS_COPIES:
        assert sorted(ours) == sorted(theirs)
        assert [n for n in ours if ours[n] != theirs[n]] == []
    else:
        assert len(ours) == 12
        assert not set(ours) & set(theirs)
        assert not set(ours.values()) & set(theirs.values())


def test_ids_kinds_and_languages(set_name: str, questions: list[dict]) -> None:
    prefix, least, kinds = SETS[set_name]
    ids = [q["id"] for q in questions]
    assert len(ids) >= least and len(set(ids)) == len(ids)
    assert all(re.fullmatch(prefix + r"-\d{3}", i) for i in ids)
    assert {q["kind"] for q in questions} == kinds
    assert {q["lang"] for q in questions} == {"ja", "en"}
    ja = sum(q["lang"] == "ja" for q in questions)
    assert 0.4 <= ja / len(questions) <= 0.6
    assert len({_norm(q["question"]) for q in questions}) == len(questions)


def test_every_question_has_one_fixture(questions: list[dict], fixtures: dict[str, dict]) -> None:
    assert set(fixtures) == {q["id"] for q in questions}
    for q in questions:
        fx = fixtures[q["id"]]
        assert fx["question"] == q["question"]
        assert [r["position"] for r in fx["serpapi"]["organic_results"]] == [1, 2, 3]


def test_answerable_questions_are_grounded(questions: list[dict], corpus: dict[str, str]) -> None:
    for q in questions:
        if q["kind"] not in IN_CORPUS_KINDS:
            continue
        where = q["id"]
        assert q["in_corpus"] is True and q["expected_branch"] == "correct", where
        assert q["gold_file"] in corpus, where
        assert q["answers"], where
        for a in q["answers"]:
            assert _norm(a) in corpus[q["gold_file"]], f"{where}: {a!r} not in {q['gold_file']}"
        if q["kind"] == "multi_part":
            files = q["gold_files"]
            assert q["gold_file"] in files and all(f in corpus for f in files), where
            assert len(q["answers_all"]) >= 2 and q["answers"] == q["answers_all"][0], where
            for group in q["answers_all"]:
                for a in group:
                    assert any(_norm(a) in corpus[f] for f in files), f"{where}: {a!r} in none of {files}"
        else:
            assert q["answers_all"] is None and q["gold_files"] is None, where
        if q["kind"] == "follow_up":
            assert q["history"] and all(set(t) == {"question", "answer"} for t in q["history"]), where
        else:
            assert q["history"] is None, where


def test_unanswerable_questions(questions: list[dict], fixtures: dict[str, dict]) -> None:
    for q in questions:
        if q["kind"] in IN_CORPUS_KINDS:
            continue
        where = q["id"]
        assert q["in_corpus"] is False and q["expected_branch"] == "incorrect", where
        assert q["gold_file"] is None and q["gold_section"] is None, where
        if q["kind"] == "topic_mentioned_fact_absent":
            assert q["answers"] == [], where
        else:  # off_topic: the first web result holds the answer
            first = _norm(fixtures[q["id"]]["serpapi"]["organic_results"][0]["snippet"])
            assert q["answers"] and all(_norm(a) in first for a in q["answers"]), where


def test_web_results_do_not_give_corpus_answers_away(
    questions: list[dict], fixtures: dict[str, dict]
) -> None:
    for q in questions:
        if q["kind"] not in IN_CORPUS_KINDS:
            continue
        golds = [a for group in (q["answers_all"] or [q["answers"]]) for a in group]
        for r in fixtures[q["id"]]["serpapi"]["organic_results"]:
            blob = _norm(r["title"] + r["snippet"])
            assert not [a for a in golds if _norm(a) in blob], f"{q['id']}: result {r['position']}"


def test_harness_loads_the_set(set_dir: Path) -> None:
    data = load_dataset(set_dir)
    assert len(data.questions) == len(data.web_fixtures)


def test_full_validator_passes(set_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """crag-eval --check with the set's rules.toml (tests/crag/cli/test_check_set.py runs it on every set)."""
    assert main(["--check", str(set_dir)]) == 0, capsys.readouterr().out
    assert capsys.readouterr().out.startswith(f"OK: {set_dir}: ")
