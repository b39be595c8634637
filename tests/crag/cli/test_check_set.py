"""crag-eval --check SET_DIR (crag/eval/check_set.py): every set with a rules.toml passes, and a set
broken on purpose in a copy fails, with the problem named.

Offline and fast: reads the sets' files, never runs the engine.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from crag.cli.eval import main
from tests.paths import ROOT, SAMPLE_DOCS, SHARED_EVAL

# The sets the validator knows today; a set with a rules.toml that is not here fails the first test.
CHECKED = (
    "business-dev",
    "sample-docs",
    "sample-docs-2",
    "fit-hokuyo",
    "fit-minami",
    "held-setouchi",
    "held-kita-city",
)


def check(capsys: pytest.CaptureFixture[str], folder: Path) -> tuple[int, list[str], str]:
    """The command's exit status, its output lines and what it wrote to stderr."""
    status = main(["--check", str(folder)])
    out, err = capsys.readouterr()
    return status, out.splitlines(), err


def test_the_sets_with_rules_are_the_known_ones() -> None:
    assert sorted(p.parent.name for p in SHARED_EVAL.glob("*/rules.toml")) == sorted(CHECKED)


@pytest.mark.parametrize("name", CHECKED)
def test_every_set_passes(capsys: pytest.CaptureFixture[str], name: str) -> None:
    status, lines, err = check(capsys, SHARED_EVAL / name)
    assert (status, err) == (0, "")
    assert len(lines) == 1 and lines[0].startswith(f"OK: {SHARED_EVAL / name}: "), lines


def test_the_module_runs_as_a_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "crag.cli.eval", "--check", "data/eval/sample-docs-2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("OK: data/eval/sample-docs-2: 90 questions, 90 web fixtures, 12 corpus")


# ---------------------------------------------------------------- sets broken on purpose


def copy_of(tmp_path: Path, name: str) -> Path:
    """The set copied to tmp_path/data/eval/NAME, with what its rules.toml points at beside it: the
    sets whose markers it reads (their rules) and sample_docs/ at the checkout's place."""
    eval_dir = tmp_path / "data" / "eval"
    shutil.copytree(SHARED_EVAL / name, eval_dir / name)
    for other in SHARED_EVAL.glob("*/rules.toml"):
        if other.parent.name != name:
            (eval_dir / other.parent.name).mkdir()
            shutil.copy(other, eval_dir / other.parent.name / "rules.toml")
    (tmp_path / "sample_docs").symlink_to(SAMPLE_DOCS)
    return eval_dir / name


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def write_rows(path: Path, table: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in table), "utf-8")


def edit_questions(folder: Path, kind: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The set's questions and the first one of `kind`, to change and write back."""
    table = rows(folder / "questions.jsonl")
    return table, next(q for q in table if q["kind"] == kind)


def test_a_wrong_kind_count_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = copy_of(tmp_path, "fit-hokuyo")
    table, q = edit_questions(folder, "paraphrase")
    q["kind"] = "cross_language"
    write_rows(folder / "questions.jsonl", table)
    status, lines, _ = check(capsys, folder)
    assert status == 1
    assert "kind paraphrase: 59 questions, expected 60" in lines
    assert "kind cross_language: 26 questions, expected 25" in lines
    assert f"{q['id']}: cross_language question is in the document's language" in lines
    assert lines[-1] == f"FAILED: {folder}: 3 problem(s)"


def test_the_counts_are_the_rules_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = copy_of(tmp_path, "fit-hokuyo")
    rules = folder / "rules.toml"
    rules.write_text(rules.read_text("utf-8").replace("paraphrase = 60", "paraphrase = 61"), "utf-8")
    status, lines, _ = check(capsys, folder)
    assert status == 1 and lines[0] == "kind paraphrase: 60 questions, expected 61"


def test_an_answer_not_verbatim_in_its_gold_file_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = copy_of(tmp_path, "held-setouchi")
    table, q = edit_questions(folder, "literal")
    q["answers"] = [q["answers"][0] + "（改定）"]
    write_rows(folder / "questions.jsonl", table)
    status, lines, _ = check(capsys, folder)
    assert status == 1
    assert f"{q['id']}: answer {q['answers'][0]!r} not verbatim in {q['gold_file']}" in lines


def test_a_missing_field_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = copy_of(tmp_path, "sample-docs")
    table, q = edit_questions(folder, "multi_part")
    del q["gold_section"]
    write_rows(folder / "questions.jsonl", table)
    status, lines, _ = check(capsys, folder)
    assert status == 1
    assert f"{q['id']}: fields ['gold_section'] wrong (missing or extra)" in lines
    # The row is not counted, so its kind falls one short.
    assert "kind multi_part: 14 questions, expected 15" in lines


def test_a_company_name_in_a_web_result_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = copy_of(tmp_path, "held-kita-city")
    fixtures = rows(folder / "web_fixtures.jsonl")
    result = fixtures[0]["serpapi"]["organic_results"][1]
    # fit-minami's company: the set reads its markers through markers_of_sets.
    result["snippet"] += " Minami Hotels applies the same rule."
    write_rows(folder / "web_fixtures.jsonl", fixtures)
    status, lines, _ = check(capsys, folder)
    assert (status, lines[:-1]) == (1, ["kc-001: web result 2 mentions 'minami'"])


def test_a_corpus_that_is_no_longer_a_copy_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = copy_of(tmp_path, "sample-docs")
    document = folder / "corpus" / "business_travel.txt"
    document.write_text(document.read_text("utf-8") + "\n", "utf-8")
    status, lines, _ = check(capsys, folder)
    assert status == 1
    assert f"corpus/ differs from {SAMPLE_DOCS}: ['business_travel.txt']" in lines


def test_a_broken_word_document_is_a_problem_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = copy_of(tmp_path, "business-dev")
    (folder / "corpus" / "childcare-nursing-care.docx").write_bytes(b"not a zip")
    status, lines, err = check(capsys, folder)
    assert status == 1 and err == ""
    assert lines[0].startswith("corpus/childcare-nursing-care.docx: cannot read it (not a Word document")
    assert lines[1] == "corpus: 11 ja documents, expected 12"


def test_an_unreadable_json_line_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = copy_of(tmp_path, "fit-minami")
    with (folder / "questions.jsonl").open("a", encoding="utf-8") as f:
        f.write('{"id": "fm-161", \n')
    status, lines, err = check(capsys, folder)
    assert status == 1 and err == ""
    assert lines[0].startswith("questions.jsonl:161: invalid JSON (")


# What is written instead of what in fit-hokuyo's rules.toml, and what the error must say.
BAD_RULES = {
    "not TOML": ("[kinds]", "[kinds", "cannot read it (Expected ']'"),
    "a negative count": ("paraphrase = 60", "paraphrase = -1", "paraphrase must be a count"),
    "an unknown kind": ("paraphrase = 60", "paraphrasing = 60", "kinds: 'paraphrasing' is not one"),
    "an unknown heading style": ('"lead-in"', '"bold"', "txt_headings must be one of underlined, lead-in"),
    "an upper-case marker": ('"hokuyo"', '"Hokuyo"', "company markers must be non-empty and lower case"),
    "a set that is not there": ('"fit-minami"', '"fit-nowhere"', "fit-nowhere/rules.toml: not found"),
    "a misspelt key": ("id_prefix", "prefix", "unknown keys ['prefix']"),
}


@pytest.mark.parametrize("bad", sorted(BAD_RULES))
def test_a_bad_rules_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str) -> None:
    was, now, message = BAD_RULES[bad]
    folder = copy_of(tmp_path, "fit-hokuyo")
    rules = folder / "rules.toml"
    text = rules.read_text("utf-8")
    assert was in text
    rules.write_text(text.replace(was, now, 1), "utf-8")
    status, lines, err = check(capsys, folder)
    assert (status, lines) == (2, [])
    assert err.startswith(f"error: {rules}") and message in err and "Traceback" not in err


def test_a_missing_folder_or_rules_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert check(capsys, tmp_path / "nowhere") == (2, [], f"error: {tmp_path / 'nowhere'}: no such folder\n")
    folder = copy_of(tmp_path, "fit-hokuyo")
    (folder / "rules.toml").unlink()
    status, _, err = check(capsys, folder)
    assert status == 2 and err.startswith(f"error: {folder / 'rules.toml'}: not found")
