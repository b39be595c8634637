"""Run every question of a dataset through the bot's engine and score the results.

The engine is the one the bot builds from settings, with two overrides: a fresh local index from
the dataset's corpus (unless Azure AI Search is configured), and the real SerpAPI provider pointed
at a fake SerpAPI server on 127.0.0.1 that answers from the dataset's recorded web results.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import SecretStr

from crag.config.engine_settings import CragSettings
from crag.config.serpapi import SerpApiSettings
from crag.core.models import CragResult, GradedChunk
from crag.eval.dataset import Dataset, Question
from crag.eval.fixture_web import FakeSerpApi
from crag.eval.form import form_defects
from crag.eval.judges import available_judges
from crag.eval.metrics import Record, compute_metrics
from crag.providers.llm.client import LlmClient
from crag.runtime.handle import EngineHandle


async def evaluate(
    dataset: Dataset,
    out_dir: Path,
    settings: CragSettings,
    limit: int | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[dict[str, float], list[Record]]:
    out_dir.mkdir(parents=True, exist_ok=True)
    serp = FakeSerpApi(dataset.web_fixtures)
    await serp.start()
    try:
        settings = settings.model_copy(
            update={
                "docs_dir": dataset.corpus,
                "index_dir": out_dir / "index",
                "watch_docs": False,  # a fixed corpus
                "docs_base_url": "",
                "web_provider": "serpapi",
                "serpapi": SerpApiSettings(
                    SERPAPI_API_KEY=SecretStr("fake-eval-key"), SERPAPI_BASE_URL=serp.url
                ),
            }
        )
        handle = EngineHandle(settings)
        await handle.open(embed_in_background=False)
        if handle.engine is None:
            raise RuntimeError(f"cannot open the engine: {handle.error}")
        await handle.embed()  # measure hybrid retrieval, not the lexical start-up mode
        engine = handle.engine
        judge_llm = LlmClient.from_settings(settings.llm)
        judges = available_judges(judge_llm)
        judged: dict[str, list[float]] = {}
        (out_dir / "providers.json").write_text(json.dumps(engine.providers), "utf-8")
        questions = dataset.questions[:limit] if limit else dataset.questions
        records: list[Record] = []
        with (out_dir / "results.jsonl").open("w", encoding="utf-8") as f:
            for i, q in enumerate(questions):
                serp.current = q.id
                started = time.perf_counter()
                result = await engine.run(q.question, q.history or ())
                latency = (time.perf_counter() - started) * 1000
                scores: dict[str, float] = {}
                for judge in judges:
                    scores.update(await judge.judge(result, q.answers))
                record = _record(q, result, latency, scores, settings.answer_max_chars)
                records.append(record)
                row = _row(q, result, latency, record.confidently_wrong)
                row["form"] = record.form
                row.update(scores)
                for key, value in scores.items():
                    judged.setdefault(key, []).append(value)
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                if on_progress:
                    on_progress(i + 1, len(questions))
        await handle.close()
        if judge_llm is not None:
            await judge_llm.close()
    finally:
        await serp.stop()
    metrics = compute_metrics(records)
    metrics.update({key: sum(v) / len(v) for key, v in sorted(judged.items())})
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2), "utf-8")
    return metrics, records


def _retrieved(result: CragResult) -> list[GradedChunk]:
    """The first search's passages in its rank order, then those re-searches added (retrieval
    scores of different searches are not comparable)."""
    return list(result.graded)


def _record(
    q: Question, result: CragResult, latency_ms: float, judged: dict[str, float], budget: int
) -> Record:
    retrieved = _retrieved(result)
    return Record(
        id=q.id,
        in_corpus=q.in_corpus,
        expected_branch=q.expected_branch,
        gold_file=q.gold_file,
        answers=q.answers,
        branch=result.branch.value,
        answer=result.answer,
        cited_files=result.cited_files,
        retrieved_files=[g.chunk.file for g in retrieved],
        retrieved_texts=[g.chunk.framed_text for g in retrieved],
        retrieved_bodies=[g.chunk.text for g in retrieved],
        latency_ms=latency_ms,
        scores=[g.score for g in retrieved],
        near=bool(q.answer_near_in_corpus),
        kind=q.kind,
        gold_files=q.gold_set,
        answers_all=q.answers_all,
        missing_parts=result.missing_parts,
        judged=judged,
        form=form_defects(result.answer, result.language, budget),
    )


def _row(q: Question, result: CragResult, latency_ms: float, confidently_wrong: bool) -> dict[str, object]:
    return {
        "id": q.id,
        "question": q.question,
        "expected_branch": q.expected_branch,
        "branch": result.branch.value,
        "confidently_wrong": confidently_wrong,
        "answer": result.answer,
        "gold_answers": q.answers,
        "kind": q.kind,
        "gold_file": q.gold_file,
        "gold_files": q.gold_set,
        "answers_all": q.answers_all,
        "history": [t.model_dump() for t in q.history or ()],
        "cited_files": result.cited_files,
        "urls": result.web_urls,
        "web_status": result.web.status.value,
        "queries": result.queries,
        "missing_parts": result.missing_parts,
        "web_query": result.web_query,
        "scores": [
            {
                "file": g.chunk.file,
                "headers": g.chunk.headers,
                "retrieval": round(g.retrieval_score, 3),
                "grade": g.score,
                "topic": g.topic,  # the feature grader's, beside a reading grader (0.0 otherwise)
                "kept": g.kept,
            }
            for g in _retrieved(result)
        ],
        "timings": result.timings_ms,
        "latency_ms": round(latency_ms, 2),
    }
