"""Run every question of a dataset through the bot's engine and score the results."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from crag.eval.dataset import Dataset, Question
from crag.eval.metrics import Record, compute_metrics
from crag.factory import build_engine, open_local_index
from crag.models import CragResult
from crag.settings import CragSettings


async def evaluate(
    dataset: Dataset,
    out_dir: Path,
    settings: CragSettings,
    limit: int | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[dict[str, float], list[dict[str, object]]]:
    out_dir.mkdir(parents=True, exist_ok=True)
    settings = settings.model_copy(
        update={"docs_dir": dataset.corpus, "index_dir": out_dir / "index", "docs_base_url": ""}
    )
    index, _ = open_local_index(settings)
    engine = build_engine(settings, index)
    questions = dataset.questions[:limit] if limit else dataset.questions
    records: list[Record] = []
    rows: list[dict[str, object]] = []
    with (out_dir / "results.jsonl").open("w", encoding="utf-8") as f:
        for i, q in enumerate(questions):
            started = time.perf_counter()
            result = await engine.run(q.question)
            latency = (time.perf_counter() - started) * 1000
            record, row = _record(q, result, latency)
            records.append(record)
            rows.append(row)
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            if on_progress:
                on_progress(i + 1, len(questions))
    metrics = compute_metrics(records)
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2), "utf-8")
    return metrics, rows


def _record(q: Question, result: CragResult, latency_ms: float) -> tuple[Record, dict[str, object]]:
    retrieved = sorted(result.graded, key=lambda g: -g.retrieval_score)
    record = Record(
        in_corpus=q.in_corpus,
        expected_branch=q.expected_branch,
        gold_file=q.gold_file,
        answers=q.answers,
        branch=result.branch.value,
        answer=result.answer,
        cited_files=result.cited_files,
        retrieved_files=[g.chunk.file for g in retrieved],
        retrieved_texts=[g.chunk.text for g in retrieved],
        latency_ms=latency_ms,
    )
    row: dict[str, object] = {
        "id": q.id,
        "question": q.question,
        "expected_branch": q.expected_branch,
        "branch": result.branch.value,
        "answer": result.answer,
        "gold_answers": q.answers,
        "gold_file": q.gold_file,
        "cited_files": result.cited_files,
        "urls": result.web_urls,
        "scores": [
            {
                "file": g.chunk.file,
                "headers": g.chunk.headers,
                "retrieval": round(g.retrieval_score, 3),
                "grade": g.score,
            }
            for g in retrieved
        ],
        "timings": result.timings_ms,
        "latency_ms": round(latency_ms, 2),
    }
    return record, row
