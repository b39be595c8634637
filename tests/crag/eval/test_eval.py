"""The evaluation CLI on the shared smoke set, and the metric functions on hand-made cases."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from crag.eval.metrics import Record, branch_for, compute_metrics, contains_any, normalize, percentile, sweep
from tests.paths import ROOT, SHARED_EVAL

REQUIRED = [
    "questions",
    "in_corpus",
    "withheld",
    "retrieval.recall_at_1",
    "retrieval.recall_at_5",
    "retrieval.recall_at_10",
    "retrieval.mrr_at_10",
    "retrieval.precision_at_3",
    "retrieval.precision_at_5",
    "retrieval.ndcg_at_3",
    "retrieval.ndcg_at_5",
    "retrieval.answer_recall_at_5",
    "retrieval.answer_recall_at_5_body",
    "routing.accuracy",
    "routing.in_corpus_internal",
    "routing.withheld_web",
    "answer.in_corpus_contains_gold",
    "answer.withheld_contains_gold",
    "answer.mean_chars",
    "latency_ms.p50",
    "latency_ms.p95",
]


def test_eval_cli_on_smoke_set(tmp_path: Path) -> None:
    smoke = SHARED_EVAL / "smoke"
    if not smoke.is_dir():
        pytest.skip(f"shared evaluation data not found at {smoke}")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "crag.cli.eval", str(smoke), "--out", str(out), "--sweep"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads((out / "metrics.json").read_text("utf-8"))
    assert set(REQUIRED) <= set(metrics)
    assert metrics["questions"] == 15 and metrics["in_corpus"] == 10 and metrics["withheld"] == 5
    assert all(
        0.0 <= metrics[k] <= 1.0
        for k in REQUIRED
        if "." in k and not k.startswith(("latency", "answer.mean"))
    )
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text("utf-8").splitlines()]
    assert len(rows) == 15
    assert {"id", "branch", "answer", "cited_files", "urls", "scores", "timings"} <= set(rows[0])
    # Withheld questions reach the fake SerpAPI through the real provider and cite web URLs.
    web_rows = [r for r in rows if r["branch"] != "correct"]
    assert web_rows and all(r["web_status"] == "ok" for r in web_rows)
    assert any(u.startswith("https://ja.wikipedia.org/") for r in web_rows for u in r["urls"])
    report = (out / "report.md").read_text("utf-8")
    assert "routing.accuracy" in report and "Threshold sweep" in report
    assert "## Per question" in report and "![per question](questions.png)" in report
    for png in ("grades.png", "routing.png", "latency.png", "questions.png"):
        assert (out / png).read_bytes().startswith(b"\x89PNG")
    assert "routing.accuracy" in proc.stdout and "sweep: best" in proc.stdout


def test_eval_cli_limit_and_bad_dataset(tmp_path: Path) -> None:
    smoke = SHARED_EVAL / "smoke"
    if not smoke.is_dir():
        pytest.skip(f"shared evaluation data not found at {smoke}")
    proc = subprocess.run(
        [sys.executable, "-m", "crag.cli.eval", str(smoke), "--out", str(tmp_path / "o"), "--limit", "3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "o" / "metrics.json").read_text("utf-8"))["questions"] == 3
    bad = subprocess.run(
        [sys.executable, "-m", "crag.cli.eval", str(tmp_path), "--out", str(tmp_path / "x")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "not a dataset folder" in bad.stderr


def _rec(**kw: object) -> Record:
    base: dict[str, object] = {
        "in_corpus": True,
        "expected_branch": "correct",
        "gold_file": "a.md",
        "answers": ["42"],
        "branch": "correct",
        "answer": "",
        "cited_files": [],
        "retrieved_files": [],
        "retrieved_texts": [],
        "latency_ms": 1.0,
    }
    base.update(kw)
    return Record.model_validate(base)


def test_normalized_containment() -> None:
    assert normalize("ＡＢＣ １２３ x") == "abc123x"
    assert contains_any("答えは 1124年 から 1126年 まで", ["1124年から1126年"])
    assert not contains_any("nothing here", ["42"])
    assert not contains_any("anything", [""])


def test_retrieval_metrics() -> None:
    records = [
        _rec(
            retrieved_files=["a.md", "b.md"],
            retrieved_texts=["the answer is 42", "x"],
            retrieved_bodies=["the answer is 42", "x"],
        ),
        # The answer is only in the heading path of a chunk (the document is titled "42").
        _rec(
            retrieved_files=["b.md", "c.md", "a.md"],
            retrieved_texts=["x", "y", "42\nz"],
            retrieved_bodies=["x", "y", "z"],
        ),
        _rec(retrieved_files=["b.md"], retrieved_texts=["x"]),
        _rec(in_corpus=False, gold_file=None, expected_branch="incorrect", branch="incorrect"),
    ]
    m = compute_metrics(records)
    assert m["in_corpus"] == 3 and m["withheld"] == 1
    assert m["retrieval.recall_at_1"] == pytest.approx(1 / 3)
    assert m["retrieval.recall_at_5"] == pytest.approx(2 / 3)
    assert m["retrieval.mrr_at_10"] == pytest.approx((1 + 1 / 3 + 0) / 3)
    assert m["retrieval.answer_recall_at_5"] == pytest.approx(2 / 3)
    assert m["retrieval.answer_recall_at_5_body"] == pytest.approx(1 / 3)


def test_routing_and_answer_metrics() -> None:
    records = [
        _rec(branch="correct", cited_files=["a.md"], answer="It is 42."),
        _rec(branch="ambiguous", cited_files=["a.md"], answer="No idea"),
        _rec(branch="incorrect", answer="x"),
        _rec(in_corpus=False, gold_file=None, expected_branch="incorrect", branch="ambiguous", answer="42!"),
        _rec(in_corpus=False, gold_file=None, expected_branch="incorrect", branch="correct", near=True),
    ]
    m = compute_metrics(records)
    assert m["routing.accuracy"] == pytest.approx(1 / 5)
    assert m["routing.accuracy_excluding_near"] == pytest.approx(1 / 4)
    assert m["routing.in_corpus_internal"] == pytest.approx(2 / 3)
    assert m["routing.withheld_web"] == pytest.approx(1 / 2)
    assert m["answer.in_corpus_contains_gold"] == pytest.approx(1 / 3)
    assert m["answer.withheld_contains_gold"] == pytest.approx(1 / 2)
    assert m["answer.mean_chars"] == pytest.approx((9 + 7 + 1 + 3 + 0) / 5)


def test_percentile_and_sweep() -> None:
    assert percentile([1, 2, 3, 4], 0.5) == pytest.approx(2.5)
    assert percentile([], 0.95) == 0.0
    assert branch_for([0.85, 0.1], 0.8, 0.4) == "correct"
    assert branch_for([0.5], 0.8, 0.4) == "ambiguous"
    assert branch_for([], 0.8, 0.4) == "incorrect"
    records = [
        _rec(scores=[0.7]),
        _rec(in_corpus=False, expected_branch="incorrect", scores=[0.3]),
    ]
    rows = sweep(records, [(0.8, 0.4), (0.6, 0.4)])
    assert rows[0]["upper"] == 0.6 and rows[0]["routing.accuracy"] == 1.0
    assert rows[1]["routing.accuracy"] == 0.5 and rows[1]["ambiguous_share"] == 0.5


def test_confidently_wrong_multi_part_and_kinds() -> None:
    records = [
        # Green badge, right fact.
        _rec(kind="literal", branch="correct", cited_files=["a.md"], answer="It is 42."),
        # Green badge, wrong fact: confidently wrong.
        _rec(kind="paraphrase", branch="correct", cited_files=["a.md"], answer="It is 24."),
        # Wrong fact, but not under the green badge: wrong, not confidently.
        _rec(kind="paraphrase", branch="ambiguous", cited_files=["a.md"], answer="maybe 7"),
        # Multi-part: one of the two parts missing is not an answer, both present is.
        _rec(kind="multi_part", branch="correct", answer="4100", answers_all=[["4100"], ["4199"]]),
        _rec(kind="multi_part", branch="correct", answer="4100 and 4199", answers_all=[["4100"], ["4199"]]),
        # The documents cannot answer it, yet the bot answered from them.
        _rec(
            kind="topic_mentioned_fact_absent",
            in_corpus=False,
            gold_file=None,
            expected_branch="incorrect",
            branch="correct",
            answers=[],
        ),
        _rec(
            kind="topic_mentioned_fact_absent",
            in_corpus=False,
            gold_file=None,
            expected_branch="incorrect",
            branch="incorrect",
            answers=[],
        ),
    ]
    m = compute_metrics(records)
    assert m["answer.confidently_wrong"] == pytest.approx(3 / 7)
    assert m["answer.from_documents"] == pytest.approx(5 / 7)
    assert m["answer.in_corpus_contains_gold"] == pytest.approx(2 / 5)
    assert m["by_kind.multi_part.answer.contains_gold"] == pytest.approx(1 / 2)
    assert m["by_kind.multi_part.answer.confidently_wrong"] == pytest.approx(1 / 2)
    assert m["by_kind.paraphrase.answer.confidently_wrong"] == pytest.approx(1 / 2)
    assert m["by_kind.topic_mentioned_fact_absent.routing.accuracy"] == pytest.approx(1 / 2)
    assert m["by_kind.topic_mentioned_fact_absent.answer.from_documents"] == pytest.approx(1 / 2)
    assert "by_kind.topic_mentioned_fact_absent.retrieval.recall_at_5" not in m  # nothing to retrieve
    assert m["by_kind.literal.questions"] == 1


def test_a_question_answered_by_two_files_counts_either() -> None:
    rec = _rec(gold_files=["a.md", "b.md"], retrieved_files=["c.md", "b.md"], cited_files=["b.md"])
    m = compute_metrics([rec])
    assert m["retrieval.recall_at_1"] == 0.0 and m["retrieval.recall_at_5"] == 1.0
    assert m["retrieval.mrr_at_10"] == pytest.approx(1 / 2)


async def test_history_reaches_the_engine_and_kinds_reach_the_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crag.config.engine_settings import CragSettings
    from crag.engine import CragEngine
    from crag.eval.dataset import load_dataset
    from crag.eval.runner import evaluate

    data = tmp_path / "set"
    (data / "corpus").mkdir(parents=True)
    (data / "corpus" / "desk.md").write_text(
        "# Service desk\n\n## Contact\n\nCall the service desk on extension 4100. Out of hours, call 4199.\n",
        "utf-8",
    )
    questions = [
        {
            "id": "q1",
            "question": "and out of hours?",
            "answers": ["4199"],
            "gold_file": "desk.md",
            "in_corpus": True,
            "expected_branch": "correct",
            "kind": "follow_up",
            "history": [{"question": "What is the service desk extension?", "answer": "4100"}],
        },
        {
            "id": "q2",
            "question": "service desk extension and the out-of-hours number?",
            "answers": ["4100"],
            "answers_all": [["4100"], ["4199"]],
            "gold_file": "desk.md",
            "in_corpus": True,
            "expected_branch": "correct",
            "kind": "multi_part",
        },
    ]
    (data / "questions.jsonl").write_text("\n".join(json.dumps(q) for q in questions), "utf-8")
    seen: list[tuple[str, list[str]]] = []
    original = CragEngine.run

    async def spy(self: CragEngine, question: str, history: Any = (), **kwargs: Any) -> Any:
        seen.append((question, [t.question for t in history]))
        return await original(self, question, history, **kwargs)

    monkeypatch.setattr(CragEngine, "run", spy)
    metrics, _ = await evaluate(load_dataset(data), tmp_path / "out", CragSettings())
    assert seen == [
        ("and out of hours?", ["What is the service desk extension?"]),
        (questions[1]["question"], []),
    ]
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text("utf-8").splitlines()]
    assert [r["kind"] for r in rows] == ["follow_up", "multi_part"]
    assert rows[1]["answers_all"] == [["4100"], ["4199"]]
    assert metrics["by_kind.follow_up.questions"] == 1 and "answer.confidently_wrong" in metrics
    assert isinstance(rows[0]["confidently_wrong"], bool)


def test_after_previous_asks_the_set_as_one_conversation(tmp_path: Path) -> None:
    from crag.eval.dataset import after_previous, load_dataset

    data = tmp_path / "set"
    (data / "corpus").mkdir(parents=True)
    rows = [
        {"id": "a", "question": "first?", "in_corpus": False, "expected_branch": "incorrect"},
        {"id": "b", "question": "second?", "in_corpus": False, "expected_branch": "incorrect"},
        {
            "id": "c",
            "question": "and then?",
            "in_corpus": False,
            "expected_branch": "incorrect",
            "history": [{"question": "own earlier turn", "answer": "x"}],
        },
        {"id": "d", "question": "fourth?", "in_corpus": False, "expected_branch": "incorrect"},
    ]
    (data / "questions.jsonl").write_text("\n".join(json.dumps(r) for r in rows), "utf-8")
    dataset = load_dataset(data)
    chained = after_previous(dataset)
    histories = [[t.question for t in q.history or []] for q in chained.questions]
    # Each question without its own history comes after the one before it; a written one is kept.
    assert histories == [[], ["first?"], ["own earlier turn"], ["and then?"]]
    assert dataset.questions[1].history is None  # the set as loaded is unchanged


def test_sweep_shows_the_confidently_wrong_trade_off() -> None:
    records = [
        _rec(branch="correct", scores=[0.95], answer="42"),  # right, graded high
        _rec(branch="correct", scores=[0.85], answer="24"),  # wrong, graded lower
        _rec(in_corpus=False, gold_file=None, expected_branch="incorrect", branch="correct", scores=[0.82]),
    ]
    rows = {r["upper"]: r for r in sweep(records, [(0.8, 0.4), (0.9, 0.4)])}
    assert rows[0.8]["answer.confidently_wrong"] == pytest.approx(2 / 3)
    assert rows[0.8]["answer.from_documents"] == pytest.approx(1.0)
    assert rows[0.9]["answer.confidently_wrong"] == 0.0
    assert rows[0.9]["answer.from_documents"] == pytest.approx(1 / 3)
