"""The feedback loop: rated-down and refused answers, from the SQLite and the PostgreSQL store, become
an evaluation set (`python -m feedback to-eval`) that `python -m crag.cli.eval` loads and runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from crag.core.models import Branch, Citation, CragResult
from crag.eval.dataset import load_dataset
from feedback.postgres_store import PostgresFeedbackStore
from feedback.protocol import Feedback
from feedback.sqlite_store import FeedbackStore
from feedback.to_eval import question_id
from hosting.ui_texts import REFUSAL
from tests.paths import ROOT

DOCS = {
    "wifi.md": "# Office Wi-Fi\n\n## Guest network\n\nVisitors use the SSID MT-Guest. The password changes "
    "every Monday and is shown at the 8F reception desk.\n",
    "parking.md": "# Parking\n\n## Bicycles\n\nBicycle parking is in the basement, level B1.\n",
}
WIFI = "What is the guest Wi-Fi password?"


def _answer(question: str, text: str, language: str = "en", cited: str = "") -> CragResult:
    citations = [Citation(number=1, kind="document", title=cited, file=cited)] if cited else []
    branch = Branch.CORRECT if cited else Branch.INCORRECT
    return CragResult(question=question, language=language, branch=branch, answer=text, citations=citations)


async def fill(store: Feedback) -> dict[str, str]:
    """Answers and ratings as the bot records them; returns the answers' ids by name."""
    answers = {
        # The same question twice (other spacing and case), both rated down, by two users.
        "wifi1": _answer(WIFI, "The password is MT-2024 [1]", cited="wifi.md"),
        "wifi2": _answer(
            "what is the guest  wi-fi password?", "It is shown at reception [1]", cited="wifi.md"
        ),
        # Refused, never rated.
        "canteen": _answer("社員食堂は何時まで？", REFUSAL["ja"], language="ja"),
        # Liked: not exported.
        "parking": _answer("Where do I park my bike?", "Level B1 [1]", cited="parking.md"),
        # Rated down, then up by the same user: the rating that counts is up.
        "changed": _answer("Is there a gym?", "No [1]", cited="parking.md"),
    }
    for name, result in answers.items():
        await store.record_answer(result, f"conv-{name}", "user-1", "msteams")
    await store.record_feedback(
        answers["wifi1"].id, "down", "conv-wifi1", "user-1", "msteams", comment="wrong"
    )
    await store.record_feedback(answers["wifi2"].id, "down", "conv-wifi2", "user-1", "msteams", comment="old")
    await store.record_feedback(answers["wifi2"].id, "down", "conv-wifi2", "user-2", "msteams")
    await store.record_feedback(answers["parking"].id, "up", "conv-parking", "user-1", "msteams")
    await store.record_feedback(answers["changed"].id, "down", "conv-changed", "user-1", "msteams")
    await store.record_feedback(answers["changed"].id, "up", "conv-changed", "user-1", "msteams")
    return {name: r.id for name, r in answers.items()}


def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text, "utf-8")
    (folder / ".hidden").write_text("not a document", "utf-8")
    return folder


def run(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def questions_of(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "questions.jsonl").read_text("utf-8").splitlines()]


async def test_rated_down_and_refused_answers_round_trip_into_the_evaluation(tmp_path: Path) -> None:
    db = tmp_path / "feedback.sqlite3"
    store = FeedbackStore(db)
    await store.open()
    ids = await fill(store)
    await store.close()
    corpus = docs(tmp_path)

    down = run(
        "feedback",
        "--db",
        str(db),
        "to-eval",
        "--down",
        "--out",
        str(tmp_path / "down"),
        "--corpus",
        str(corpus),
    )
    assert down.returncode == 0, down.stderr
    (wifi,) = questions_of(tmp_path / "down")  # the two spellings are one question
    assert wifi["id"] == question_id(WIFI) and wifi["question"] == WIFI and wifi["kind"] == "rated_down"
    assert wifi["answers"] == [] and wifi["gold_file"] is None and wifi["lang"] == "en"
    review = wifi["review"]
    assert review["reasons"] == ["rated_down"] and review["times_asked"] == 2
    assert review["comments"] == ["wrong", "old"]
    assert [a["answer"] for a in review["answers"]] == [
        "The password is MT-2024 [1]",
        "It is shown at reception [1]",
    ]
    assert review["answers"][0]["cited_files"] == ["wifi.md"] and review["answers"][0]["branch"] == "correct"
    assert "1 questions (3 rated down answers)" in down.stderr

    both_dir = tmp_path / "both"
    both = run("feedback", "--db", str(db), "to-eval", "--out", str(both_dir), "--corpus", str(corpus))
    assert both.returncode == 0, both.stderr
    rows = {q["id"]: q for q in questions_of(both_dir)}
    assert set(rows) == {question_id(WIFI), question_id("社員食堂は何時まで？")}
    canteen = rows[question_id("社員食堂は何時まで？")]
    assert canteen["kind"] == "refused" and canteen["review"]["answers"][0]["answer"] == REFUSAL["ja"]
    assert ids["parking"] not in json.dumps(rows) and "gym" not in json.dumps(rows)
    assert sorted(p.name for p in (both_dir / "corpus").iterdir()) == ["parking.md", "wifi.md"]
    # The shared format, as the evaluation loads it: one fixture per question, no recorded results.
    dataset = load_dataset(both_dir)
    assert [q.id for q in dataset.questions] == list(rows)
    assert set(dataset.web_fixtures) == set(rows)
    assert all(f["serpapi"]["organic_results"] == [] for f in dataset.web_fixtures.values())

    # ...and runs: empty gold answers crash no metric and count in none of the answer metrics.
    out = tmp_path / "run"
    evaluated = run(
        "crag.cli.eval", str(both_dir), "--out", str(out), env={"CRAG_EMBEDDINGS": "off"}, timeout=300
    )
    assert evaluated.returncode == 0, evaluated.stderr
    metrics = json.loads((out / "metrics.json").read_text("utf-8"))
    assert metrics["questions"] == 2 and metrics["questions_without_gold"] == 2
    assert metrics["answer.confidently_wrong"] == 0.0
    assert metrics["by_kind.refused.questions"] == 1 and metrics["by_kind.rated_down.questions"] == 1
    results = [json.loads(line) for line in (out / "results.jsonl").read_text("utf-8").splitlines()]
    assert {r["id"] for r in results} == set(rows)
    assert (out / "questions.png").read_bytes().startswith(b"\x89PNG")

    # A second export into the same folder would overwrite a reviewer's work: refused, said plainly.
    again = run("feedback", "--db", str(db), "to-eval", "--out", str(both_dir), "--corpus", str(corpus))
    assert again.returncode == 2 and "already holds an evaluation set" in again.stderr
    assert "Traceback" not in again.stderr


def test_nothing_to_export_and_bad_input(tmp_path: Path) -> None:
    missing = run("feedback", "--db", str(tmp_path / "none.sqlite3"), "to-eval", "--out", str(tmp_path / "x"))
    assert missing.returncode == 2 and "feedback database not found" in missing.stderr
    assert "Traceback" not in missing.stderr


async def test_an_empty_store_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "feedback.sqlite3"
    store = FeedbackStore(db)
    await store.open()
    await store.close()
    done = run("feedback", "--db", str(db), "to-eval", "--down", "--out", str(tmp_path / "x"))
    assert done.returncode == 0 and "no rated down answers: nothing written" in done.stderr
    assert not (tmp_path / "x").exists()
    bad_corpus = FeedbackStore(tmp_path / "other.sqlite3")
    await bad_corpus.open()
    await fill(bad_corpus)
    await bad_corpus.close()
    nowhere = run(
        "feedback",
        "--db",
        str(tmp_path / "other.sqlite3"),
        "to-eval",
        "--out",
        str(tmp_path / "y"),
        "--corpus",
        str(tmp_path / "no-such-folder"),
    )
    assert nowhere.returncode == 2 and "documents folder not found" in nowhere.stderr


async def test_the_postgres_store_exports_the_same_set(postgres_dsn: str, tmp_path: Path) -> None:
    store = PostgresFeedbackStore(postgres_dsn, tmp_path / "pg.pending.jsonl", replay_interval=3600)
    await store.open()
    await fill(store)
    await store.close()
    out = tmp_path / "pg"
    done = run(
        "feedback",
        "--store",
        "postgres",
        "to-eval",
        "--out",
        str(out),
        "--corpus",
        str(docs(tmp_path)),
        env={"CRAG_POSTGRES_URL": postgres_dsn},
    )
    assert done.returncode == 0, done.stderr
    rows = {q["id"]: q for q in questions_of(out)}
    assert set(rows) == {question_id(WIFI), question_id("社員食堂は何時まで？")}
    wifi = rows[question_id(WIFI)]["review"]
    assert wifi["comments"] == ["wrong", "old"] and wifi["times_asked"] == 2
    assert wifi["first_asked"] <= wifi["last_asked"] and "T" in wifi["first_asked"]  # ISO times, as SQLite's
    assert postgres_dsn not in done.stderr
