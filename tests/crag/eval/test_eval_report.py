"""The evaluation report's additions on hand-made results with known values: precision@k and nDCG@k
beside recall and MRR, judges and the new retrieval metrics by kind, the per-question heatmap, and
`python -m crag.cli.eval compare` on two small run folders."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import matplotlib.image
import pytest

from crag.eval.metrics import Record, compute_metrics, question_scores
from crag.eval.report import plot_question_heatmap, write_report
from tests.paths import ROOT

IDEAL_2_OF_5 = 1 + 1 / math.log2(3)  # DCG of two relevant passages at ranks 1 and 2


def rec(**kw: Any) -> Record:
    base: dict[str, Any] = {
        "id": "q",
        "in_corpus": True,
        "expected_branch": "correct",
        "gold_file": "a.md",
        "answers": ["42"],
        "branch": "correct",
        "answer": "It is 42.",
        "cited_files": ["a.md"],
        "retrieved_files": [],
        "retrieved_texts": [],
        "latency_ms": 10.0,
    }
    base.update(kw)
    return Record.model_validate(base)


def hand_made() -> list[Record]:
    return [
        # Gold passages at ranks 1 and 3 of five.
        rec(id="r1", kind="literal", retrieved_files=["a.md", "b.md", "a.md", "c.md", "d.md"]),
        # The only gold passage at rank 5.
        rec(id="r2", kind="literal", retrieved_files=["b.md", "c.md", "d.md", "e.md", "a.md"], answer="no"),
        # Withheld: no retrieval metric.
        rec(
            id="r3",
            kind="off_topic",
            in_corpus=False,
            gold_file=None,
            answers=[],
            expected_branch="incorrect",
            branch="incorrect",
            retrieved_files=["b.md"],
        ),
        # Exported from feedback, not reviewed: no gold file, no gold answer.
        rec(id="r4", gold_file=None, answers=[], branch="correct", retrieved_files=["b.md"]),
    ]


def test_precision_and_ndcg_at_k() -> None:
    m = compute_metrics(hand_made())
    assert m["retrieval.precision_at_5"] == pytest.approx((2 / 5 + 1 / 5) / 2)
    assert m["retrieval.precision_at_3"] == pytest.approx((2 / 3 + 0) / 2)
    ndcg_r1 = (1 + 1 / math.log2(4)) / IDEAL_2_OF_5
    ndcg_r2 = (1 / math.log2(6)) / 1.0
    assert m["retrieval.ndcg_at_5"] == pytest.approx((ndcg_r1 + ndcg_r2) / 2)
    assert m["retrieval.ndcg_at_3"] == pytest.approx((ndcg_r1 + 0.0) / 2)
    # Recall and MRR beside them, on the same two questions.
    assert m["retrieval.recall_at_5"] == 1.0 and m["retrieval.recall_at_1"] == pytest.approx(1 / 2)
    assert m["retrieval.mrr_at_10"] == pytest.approx((1 + 1 / 5) / 2)
    # The unreviewed question counts in routing, not in answer or retrieval metrics, and its green
    # badge is not called confidently wrong (there is no gold to be wrong against).
    assert m["questions_without_gold"] == 1
    assert m["answer.in_corpus_contains_gold"] == pytest.approx(1 / 2)
    assert m["answer.confidently_wrong"] == pytest.approx(1 / 4)  # r2: green badge, no 42
    assert m["routing.accuracy"] == 1.0


def test_by_kind_carries_the_new_metrics_and_the_judges() -> None:
    records = hand_made()
    records[0] = records[0].model_copy(update={"judged": {"judge.fluency": 5.0, "judge.relevance": 4.0}})
    records[1] = records[1].model_copy(update={"judged": {"judge.fluency": 3.0}})
    m = compute_metrics(records)
    assert m["by_kind.literal.retrieval.precision_at_5"] == pytest.approx(0.3)
    assert m["by_kind.literal.retrieval.ndcg_at_5"] == pytest.approx(m["retrieval.ndcg_at_5"])
    assert m["by_kind.literal.retrieval.mrr_at_10"] == pytest.approx(0.6)
    assert m["by_kind.literal.judge.fluency"] == pytest.approx(4.0)
    assert m["by_kind.literal.judge.relevance"] == pytest.approx(4.0)
    assert "by_kind.off_topic.retrieval.ndcg_at_5" not in m


def test_one_questions_scores() -> None:
    r1, r2, r3, r4 = hand_made()
    s1 = question_scores(r1.model_copy(update={"judged": {"judge.fluency": 4.0, "judge.cosine": 0.9}}))
    assert s1["contains gold"] == 1.0 and s1["precision@5"] == pytest.approx(0.4)
    assert s1["fluency"] == pytest.approx(0.75) and s1["cosine"] == pytest.approx(0.9)
    s2 = question_scores(r2)
    assert s2["contains gold"] == 0.0 and s2["not confidently wrong"] == 0.0 and s2["MRR@10"] == 0.2
    assert math.isnan(question_scores(r3)["nDCG@5"])
    assert math.isnan(question_scores(r4)["contains gold"])


def test_report_has_the_heatmap_and_the_hardest_questions(tmp_path: Path) -> None:
    records = hand_made()
    records[0] = records[0].model_copy(update={"judged": {"judge.fluency": 5.0}})
    metrics = compute_metrics(records)
    metrics["judge.fluency"] = 5.0
    path = write_report(tmp_path, "hand", metrics, records, 0.8, 0.4, {"grade": "local"})
    report = path.read_text("utf-8")
    assert "![per question](questions.png)" in report
    hardest = [line for line in report.splitlines() if line.startswith(("| r1 |", "| r2 |", "| r4 |"))]
    assert hardest[0].startswith("| r2 |")  # wrong answer, gold passage last: the hardest
    assert "contains gold" in hardest[0] and "not confidently wrong" in hardest[0]
    assert "| retrieval.ndcg_at_5 | " in report and "| retrieval.precision_at_5 | " in report
    header = next(line for line in report.splitlines() if line.startswith("| kind |"))
    assert "precision@5" in header and "nDCG@5" in header and "judge.fluency" in header
    image = matplotlib.image.imread(tmp_path / "questions.png")
    assert image.shape[0] > 100 and image.shape[1] > 300
    columns = plot_question_heatmap(records, tmp_path / "again.png")
    assert columns[:3] == ["contains gold", "routing right", "not confidently wrong"]
    assert "fluency" in columns and "nDCG@5" in columns


def _row(qid: str, **kw: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": qid,
        "question": f"question {qid}?",
        "kind": "literal",
        "expected_branch": "correct",
        "branch": "correct",
        "answer": "It is 42.",
        "gold_answers": ["42"],
        "answers_all": None,
        "confidently_wrong": False,
        "latency_ms": 1000.0,
    }
    row.update(kw)
    return row


def _run(folder: Path, rows: list[dict[str, Any]]) -> Path:
    folder.mkdir()
    (folder / "results.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", "utf-8")
    return folder


def test_compare_two_runs(tmp_path: Path) -> None:
    a = _run(
        tmp_path / "a",
        [
            _row("q1", answer="I do not know", confidently_wrong=True),
            _row("q2"),
            _row("q3"),
            _row("q4", branch="correct", expected_branch="incorrect", confidently_wrong=True),
            _row("q5", latency_ms=5.0),
            _row("gone"),
        ],
    )
    b = _run(
        tmp_path / "b",
        [
            _row("q1"),  # now answered: better on two counts
            _row("q2", branch="incorrect", answer="not in the documents", latency_ms=1500.0),
            _row("q3", latency_ms=1100.0),  # +10 %: noise, not a change
            _row("q4", branch="incorrect", expected_branch="incorrect", latency_ms=2500.0),
            _row("q5", latency_ms=9.0),  # +80 % but 4 ms: noise
            _row("new"),
        ],
    )
    proc = subprocess.run(
        [sys.executable, "-m", "crag.cli.eval", "compare", str(a), str(b)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "5 questions in both runs: 1 better, 1 worse, 1 mixed, 2 same." in out
    assert "Contains gold 4 -> 4, routed right 4 -> 4, confidently wrong 2 -> 0" in out
    assert "only in A: 1; only in B: 1" in out
    sections = out.split("\n\n")
    better = next(s for s in sections if s.startswith("better"))
    worse = next(s for s in sections if s.startswith("worse"))
    mixed = next(s for s in sections if s.startswith("mixed"))
    assert "q1" in better and "contains gold no -> yes" in better and "confidently wrong yes -> no" in better
    assert "q2" in worse and "branch (expected correct) correct -> incorrect" in worse
    assert "contains gold yes -> no" in worse and "latency 1000 ms -> 1500 ms" in worse
    assert "q4" in mixed and "latency 1000 ms -> 2500 ms" in mixed
    assert "q3" not in out.split("Contains gold")[1] and "q5" not in out.split("Contains gold")[1]
    md = (b / "compare.md").read_text("utf-8")
    assert "## Better (1)" in md and "## Worse (1)" in md and "## Mixed (1)" in md
    assert "| q2 | literal |" in md and "## Only in A (1)" in md and "gone" in md


def test_compare_says_what_is_wrong_with_a_run(tmp_path: Path) -> None:
    good = _run(tmp_path / "good", [_row("q1")])
    missing = subprocess.run(
        [sys.executable, "-m", "crag.cli.eval", "compare", str(good), str(tmp_path / "nothing")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 2 and "is not an evaluation run (no results.jsonl)" in missing.stderr
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "results.jsonl").write_text('{"id": "q1"}\n', "utf-8")
    bad = subprocess.run(
        [sys.executable, "-m", "crag.cli.eval", "compare", str(good), str(broken)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "results.jsonl:1: not a result row" in bad.stderr
    assert "Traceback" not in bad.stderr
