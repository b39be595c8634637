"""Metric functions of the evaluation contract; pure, each over per-question records."""

from __future__ import annotations

import math
import re
import statistics
import unicodedata
from collections.abc import Sequence

from pydantic import BaseModel

from crag.core.models import Thresholds
from crag.core.texts import REFUSAL, says_absent
from crag.eval.form import DEFECTS

_SPACE = re.compile(r"\s+")
# The datasets' kind for a question whose topic the corpus mentions but whose fact it lacks.
FACT_ABSENT = "topic_mentioned_fact_absent"


class Record(BaseModel):
    """What the metrics need to know about one answered question."""

    id: str = ""  # the dataset's question id (the heatmap's rows, compare's key)
    in_corpus: bool
    expected_branch: str
    gold_file: str | None
    answers: list[str]
    branch: str
    answer: str
    cited_files: list[str]
    retrieved_files: list[str]  # files of the retrieved chunks, in rank order, before grading
    retrieved_texts: list[str]  # the same chunks' texts, heading path included (Chunk.framed_text)
    retrieved_bodies: list[str] = []  # the same without the heading path
    latency_ms: float
    scores: list[float] = []  # grades of the retrieved chunks, for threshold sweeps
    near: bool = False  # withheld, but the corpus may partly answer it
    kind: str | None = None  # literal, paraphrase, cross_language, ... (optional in a dataset)
    gold_files: list[str] = []  # every file holding a part of the answer (empty: gold_file alone)
    answers_all: list[list[str]] | None = None  # multi-part: one group of variants per part
    missing_parts: list[str] = []  # parts of the question no passage answered (routing input)
    judged: dict[str, float] = {}  # judge.<name> -> this answer's score (with an LLM configured)
    form: list[str] = []  # the answer's form defects (crag/eval/form.py)

    @property
    def golds(self) -> list[str]:
        return self.gold_files or ([self.gold_file] if self.gold_file else [])

    @property
    def has_gold(self) -> bool:
        """A gold answer to check against. A question exported from feedback has none until a
        reviewer writes it: it counts in routing and latency, not in the answer metrics."""
        return bool(self.answers or self.answers_all)

    @property
    def answered(self) -> bool:
        """The answer holds the gold: every part of a multi-part question, else any variant."""
        if self.answers_all:
            return all(contains_any(self.answer, group) for group in self.answers_all)
        return contains_any(self.answer, self.answers)

    @property
    def confidently_wrong(self) -> bool:
        """Answered from documents alone (the green badge) with a wrong or missing fact, or on a
        question the documents cannot answer. Unknown (False) while the gold answer is not written."""
        if self.branch != "correct":
            return False
        return not self.in_corpus or (self.has_gold and not self.answered)


def normalize(text: str) -> str:
    return _SPACE.sub("", unicodedata.normalize("NFKC", text)).lower()


def contains_any(text: str, answers: Sequence[str]) -> bool:
    haystack = normalize(text)
    return any(normalize(a) and normalize(a) in haystack for a in answers)


def _ranked(records: Sequence[Record]) -> list[Record]:
    """The questions retrieval is scored on: answerable from the corpus, with a gold file named."""
    return [r for r in records if r.in_corpus and r.golds]


def recall_at(records: Sequence[Record], k: int) -> float:
    return _mean([hit_at(r, k) for r in _ranked(records)])


def mrr_at(records: Sequence[Record], k: int) -> float:
    return _mean([reciprocal_rank(r, k) for r in _ranked(records)])


def precision_at(records: Sequence[Record], k: int) -> float:
    """Share of the top k retrieved passages that come from a gold file (the usual precision@k;
    passages, as the grader sees them: a gold file's second passage counts again)."""
    return _mean([passage_precision(r, k) for r in _ranked(records)])


def ndcg_at(records: Sequence[Record], k: int) -> float:
    return _mean([ndcg(r, k) for r in _ranked(records)])


def hit_at(r: Record, k: int) -> bool:
    return any(g in r.retrieved_files[:k] for g in r.golds)


def reciprocal_rank(r: Record, k: int) -> float:
    top = r.retrieved_files[:k]
    found = [top.index(g) for g in r.golds if g in top]
    return 1.0 / (min(found) + 1) if found else 0.0


def passage_precision(r: Record, k: int) -> float:
    return sum(f in r.golds for f in r.retrieved_files[:k]) / k


def ndcg(r: Record, k: int) -> float:
    """nDCG@k with binary relevance (a passage of a gold file is relevant). The ideal ranking is the
    retrieved passages with the relevant ones first: how many passages of the corpus
    are relevant is not known, only which of those found are."""
    relevance = [1.0 if f in r.golds else 0.0 for f in r.retrieved_files]
    ideal = _dcg(sorted(relevance, reverse=True)[:k])
    return _dcg(relevance[:k]) / ideal if ideal else 0.0


def _dcg(relevance: Sequence[float]) -> float:
    return sum(rel / math.log2(i + 2) for i, rel in enumerate(relevance))


def answer_recall_at(records: Sequence[Record], k: int, body_only: bool = False) -> float:
    rows = [r for r in records if r.in_corpus and r.has_gold]
    return _mean(
        [
            any(
                contains_any(t, r.answers)
                for t in (r.retrieved_bodies if body_only else r.retrieved_texts)[:k]
            )
            for r in rows
        ]
    )


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo, hi = int(pos), min(int(pos) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def compute_metrics(records: Sequence[Record]) -> dict[str, float]:
    inside = [r for r in records if r.in_corpus]
    withheld = [r for r in records if not r.in_corpus]
    checkable = [r for r in inside if r.has_gold]
    lacking = [r for r in records if r.kind == FACT_ABSENT]
    latencies = [r.latency_ms for r in records]
    return {
        "questions": len(records),
        "in_corpus": len(inside),
        "withheld": len(withheld),
        # In the corpus, yet no gold answer to check (a set exported from feedback, before review).
        "questions_without_gold": len(inside) - len(checkable),
        "retrieval.recall_at_1": recall_at(records, 1),
        "retrieval.recall_at_5": recall_at(records, 5),
        "retrieval.recall_at_10": recall_at(records, 10),
        "retrieval.mrr_at_10": mrr_at(records, 10),
        "retrieval.precision_at_3": precision_at(records, 3),
        "retrieval.precision_at_5": precision_at(records, 5),
        "retrieval.ndcg_at_3": ndcg_at(records, 3),
        "retrieval.ndcg_at_5": ndcg_at(records, 5),
        "retrieval.answer_recall_at_5": answer_recall_at(records, 5),
        # Answers that only the heading names (a document's title is often the answer to "what is
        # this called?") count above, as the heading is part of the chunk; here they do not.
        "retrieval.answer_recall_at_5_body": answer_recall_at(records, 5, body_only=True),
        "routing.accuracy": _mean([r.branch == r.expected_branch for r in records]),
        "routing.accuracy_excluding_near": _mean(
            [r.branch == r.expected_branch for r in records if not r.near]
        ),
        "routing.in_corpus_internal": _mean(
            [
                r.branch in ("correct", "ambiguous") and any(g in r.cited_files for g in r.golds)
                for r in _ranked(records)
            ]
        ),
        "routing.withheld_web": _mean([r.branch in ("ambiguous", "incorrect") for r in withheld]),
        "answer.in_corpus_contains_gold": _mean([r.answered for r in checkable]),
        "answer.withheld_contains_gold": _mean([r.answered for r in withheld]),
        # Share of all questions answered from documents alone with a wrong or missing fact: the
        # failure an employee trusts most and forgives least.
        "answer.confidently_wrong": _mean([r.confidently_wrong for r in records]),
        "answer.from_documents": _mean([r.branch == "correct" for r in records]),
        # The green badge on the answerable questions, and how often an answer under it holds the gold.
        "answer.green_of_answerable": _mean([r.branch == "correct" for r in checkable]),
        "answer.green_holds_gold": _mean([r.answered for r in checkable if r.branch == "correct"]),
        # Questions whose topic the documents mention but whose fact they lack: answered with the
        # plain statement that the documents do not hold it (never under the green badge), or refused.
        "answer.absent_said": _mean([says_absent(r.answer) and r.branch != "correct" for r in lacking]),
        "answer.absent_refused": _mean([r.answer in REFUSAL.values() for r in lacking]),
        # Answerable questions told the documents lack the fact (the statement's false alarms).
        "answer.absent_said_answerable": _mean([says_absent(r.answer) for r in checkable]),
        "answer.mean_chars": statistics.fmean([len(r.answer) for r in records]) if records else 0.0,
        # Answers with any form defect (crag/eval/form.py), then each defect's share.
        "answer.form_defect": _mean([bool(r.form) for r in records]),
        **{f"answer.form.{d}": _mean([d in r.form for r in records]) for d in DEFECTS},
        "latency_ms.p50": percentile(latencies, 0.5),
        "latency_ms.p95": percentile(latencies, 0.95),
        **by_kind(records),
    }


KIND_METRICS = (
    "questions",
    "routing.accuracy",
    "retrieval.recall_at_5",
    "retrieval.precision_at_5",
    "retrieval.ndcg_at_5",
    "retrieval.mrr_at_10",
    "answer.contains_gold",
    "answer.from_documents",
    "answer.confidently_wrong",
    "answer.form_defect",
)


def by_kind(records: Sequence[Record]) -> dict[str, float]:
    """`by_kind.<kind>.<metric>` for datasets whose questions carry a kind, the judges'
    means included when they ran."""
    out: dict[str, float] = {}
    for kind in sorted({r.kind for r in records if r.kind}):
        rows = [r for r in records if r.kind == kind]
        values: dict[str, float] = {
            "questions": len(rows),
            "routing.accuracy": _mean([r.branch == r.expected_branch for r in rows]),
            "answer.from_documents": _mean([r.branch == "correct" for r in rows]),
            "answer.confidently_wrong": _mean([r.confidently_wrong for r in rows]),
            "answer.form_defect": _mean([bool(r.form) for r in rows]),
        }
        if _ranked(rows):
            values["retrieval.recall_at_5"] = recall_at(rows, 5)
            values["retrieval.precision_at_5"] = precision_at(rows, 5)
            values["retrieval.ndcg_at_5"] = ndcg_at(rows, 5)
            values["retrieval.mrr_at_10"] = mrr_at(rows, 10)
        checkable = [r for r in rows if r.in_corpus and r.has_gold]
        if checkable:
            values["answer.contains_gold"] = _mean([r.answered for r in checkable])
        out.update({f"by_kind.{kind}.{m}": values[m] for m in KIND_METRICS if m in values})
        for judge in sorted({key for r in rows for key in r.judged}):
            scores = [r.judged[judge] for r in rows if judge in r.judged]
            out[f"by_kind.{kind}.{judge}"] = statistics.fmean(scores)
    return out


# One question's scores for the heatmap, each in 0..1 with 1 best; NaN where it does not apply.
QUESTION_METRICS = (
    "contains gold",
    "routing right",
    "not confidently wrong",
    "recall@5",
    "precision@5",
    "nDCG@5",
    "MRR@10",
)


def question_scores(r: Record) -> dict[str, float]:
    nan = math.nan
    ranked = r.in_corpus and bool(r.golds)
    scores = {
        "contains gold": float(r.answered) if r.has_gold else nan,
        "routing right": float(r.branch == r.expected_branch),
        "not confidently wrong": 0.0 if r.confidently_wrong else 1.0,
        "recall@5": float(hit_at(r, 5)) if ranked else nan,
        "precision@5": passage_precision(r, 5) if ranked else nan,
        "nDCG@5": ndcg(r, 5) if ranked else nan,
        "MRR@10": reciprocal_rank(r, 10) if ranked else nan,
    }
    for key, value in sorted(r.judged.items()):
        # Judges rate 1-5; cosine similarity is already 0..1 for these embeddings (clamped).
        name = key.removeprefix("judge.")
        scores[name] = (value - 1) / 4 if key != "judge.cosine" else min(1.0, max(0.0, value))
    return scores


def branch_for(scores: Sequence[float], upper: float, lower: float, missing_parts: Sequence[str] = ()) -> str:
    """The engine's routing rule (crag/core/models.py (Thresholds)) replayed on recorded grades."""
    return Thresholds(upper=upper, lower=lower).branch(scores, missing_parts).value


def sweep(records: Sequence[Record], pairs: Sequence[tuple[float, float]]) -> list[dict[str, float]]:
    """Routing accuracy for each (upper, lower) pair, from the recorded grades (no re-run needed)."""
    rows = []
    for upper, lower in pairs:
        # Which parts lack a passage was decided at the recorded anchor; replayed as recorded.
        branches = [branch_for(r.scores, upper, lower, r.missing_parts) for r in records]
        # A question still answered from documents alone keeps its recorded answer (an
        # approximation: a higher upper threshold can only drop passages from that answer).
        wrong = [
            b == "correct" and r.branch == "correct" and r.confidently_wrong
            for b, r in zip(branches, records, strict=True)
        ]
        rows.append(
            {
                "upper": upper,
                "lower": lower,
                "routing.accuracy": _mean(
                    [b == r.expected_branch for b, r in zip(branches, records, strict=True)]
                ),
                "ambiguous_share": _mean([b == "ambiguous" for b in branches]),
                "answer.from_documents": _mean([b == "correct" for b in branches]),
                "answer.confidently_wrong": _mean(wrong),
            }
        )
    return sorted(rows, key=lambda row: (-row["routing.accuracy"], row["ambiguous_share"]))


def _mean(values: Sequence[bool] | Sequence[float]) -> float:
    return sum(float(v) for v in values) / len(values) if values else 0.0
