"""report.md with plots (PNG): grade distribution by expected branch, routing confusion, latency,
and a question x metric heatmap that shows the hard questions at a glance."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and CI

import matplotlib.pyplot as plt

from crag.eval.metrics import KIND_METRICS, Record, question_scores

BRANCHES = ("correct", "ambiguous", "incorrect")


def plot_grades(records: Sequence[Record], upper: float, lower: float, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4))
    bins = [i / 20 for i in range(21)]
    for expected, color in (("correct", "tab:green"), ("ambiguous", "tab:orange"), ("incorrect", "tab:blue")):
        best = [max(r.scores, default=0.0) for r in records if r.expected_branch == expected]
        if best:
            ax.hist(best, bins=bins, alpha=0.6, color=color, label=f"expected {expected} (n={len(best)})")
    ax.axvline(upper, color="black", linestyle="--", linewidth=1, label=f"upper {upper}")
    ax.axvline(lower, color="gray", linestyle=":", linewidth=1, label=f"lower {lower}")
    ax.set_xlabel("best grade among retrieved chunks")
    ax.set_ylabel("questions")
    ax.set_title("Grade distribution by expected branch")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def confusion(records: Sequence[Record]) -> dict[str, dict[str, int]]:
    table = {e: dict.fromkeys(BRANCHES, 0) for e in BRANCHES}
    for r in records:
        table[r.expected_branch][r.branch] += 1
    return {e: row for e, row in table.items() if sum(row.values())}


def plot_confusion(records: Sequence[Record], path: Path) -> None:
    table = confusion(records)
    expected = list(table)
    fig, ax = plt.subplots(figsize=(5.5, 1.2 + 0.8 * len(expected)))
    values = [[table[e][a] for a in BRANCHES] for e in expected]
    ax.imshow(values, cmap="Blues")
    for i, row in enumerate(values):
        for j, v in enumerate(row):
            ax.text(j, i, str(v), ha="center", va="center", fontsize=11)
    ax.set_xticks(range(len(BRANCHES)), [f"got {b}" for b in BRANCHES])
    ax.set_yticks(range(len(expected)), [f"expected {e}" for e in expected])
    ax.set_title("Routing")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_latency(records: Sequence[Record], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.hist([r.latency_ms for r in records], bins=40, color="tab:purple")
    ax.set_xlabel("turn latency (ms)")
    ax.set_ylabel("questions")
    ax.set_title("Latency")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


HEATMAP_ROWS = 200  # beyond this many questions the heatmap shows the hardest ones


def hardest_first(records: Sequence[Record]) -> list[tuple[Record, dict[str, float]]]:
    """Each question with its scores, the lowest mean score (over the metrics that apply) first."""
    scored = [(r, question_scores(r)) for r in records]
    return sorted(scored, key=lambda pair: _mean_score(pair[1]))


def _mean_score(scores: dict[str, float]) -> float:
    values = [v for v in scores.values() if not math.isnan(v)]
    return statistics.fmean(values) if values else 0.0


def plot_question_heatmap(records: Sequence[Record], path: Path) -> list[str]:
    """Questions (rows, hardest first) x metrics (columns), 0 red to 1 green, grey where a metric
    does not apply (no gold file for retrieval, no gold answer, no judge). Returns the columns."""
    rows = hardest_first(records)[:HEATMAP_ROWS]
    columns = list(dict.fromkeys(name for _, scores in rows for name in scores))
    values = [[scores.get(c, math.nan) for c in columns] for _, scores in rows]
    cmap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="#d9d9d9")
    fig, ax = plt.subplots(figsize=(1.2 + 0.75 * len(columns), 1.4 + 0.2 * len(rows)))
    ax.imshow(values or [[math.nan]], cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto", interpolation="none")
    ax.set_xticks(range(len(columns)), columns, rotation=40, ha="right", fontsize=8)
    labels = [f"{r.id or i + 1}" + (f" ({r.kind})" if r.kind else "") for i, (r, _) in enumerate(rows)]
    ax.set_yticks(range(len(rows)), labels, fontsize=6 if len(rows) > 40 else 8)
    ax.set_title(
        "Per question (hardest first)"
        + (f", {len(rows)} of {len(records)}" if len(records) > len(rows) else "")
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return columns


def hardest_table(records: Sequence[Record], n: int = 10) -> list[str]:
    rows = hardest_first(records)[:n]
    if not rows:
        return []
    return [
        "| id | kind | expected | got | mean score | low on |",
        "|---|---|---|---|---|---|",
        *(
            f"| {r.id} | {r.kind or ''} | {r.expected_branch} | {r.branch} | {_mean_score(scores):.2f} | "
            f"{', '.join(k for k, v in scores.items() if not math.isnan(v) and v < 0.5) or '–'} |"
            for r, scores in rows
        ),
        "",
    ]


def write_report(
    out_dir: Path,
    name: str,
    metrics: dict[str, float],
    records: Sequence[Record],
    upper: float,
    lower: float,
    providers: dict[str, str],
    sweep_rows: Sequence[dict[str, float]] | None = None,
) -> Path:
    plot_grades(records, upper, lower, out_dir / "grades.png")
    plot_confusion(records, out_dir / "routing.png")
    plot_latency(records, out_dir / "latency.png")
    plot_question_heatmap(records, out_dir / "questions.png")
    lines = [
        *_summary(name, metrics, upper, lower, providers),
        *_routing(records),
        *_plots_and_questions(records),
    ]
    if sweep_rows:
        lines += _sweep(sweep_rows, lower)
    path = out_dir / "report.md"
    path.write_text("\n".join(lines), "utf-8")
    return path


def _summary(
    name: str, metrics: dict[str, float], upper: float, lower: float, providers: dict[str, str]
) -> list[str]:
    """The title, the providers and thresholds, the metrics, and the metrics by kind of question."""
    return [
        f"# Evaluation: {name}",
        "",
        f"Providers: {', '.join(f'{k} = {v}' for k, v in providers.items())}. "
        f"Thresholds: upper {upper}, lower {lower}.",
        "",
        "| metric | value |",
        "|---|---|",
        *(f"| {k} | {_fmt(v)} |" for k, v in metrics.items() if not k.startswith("by_kind.")),
        "",
        *kind_table(metrics),
    ]


def _routing(records: Sequence[Record]) -> list[str]:
    """The routing confusion table (expected branch against the one taken) and its plot."""
    return [
        "## Routing",
        "",
        "| expected \\ got | " + " | ".join(BRANCHES) + " |",
        "|---|" + "---|" * len(BRANCHES),
        *(
            f"| {e} | " + " | ".join(str(row[b]) for b in BRANCHES) + " |"
            for e, row in confusion(records).items()
        ),
        "",
        "![routing](routing.png)",
        "",
    ]


def _plots_and_questions(records: Sequence[Record]) -> list[str]:
    """The grades and latency plots, then the hardest questions and the per-question heatmap."""
    return [
        "## Grades",
        "",
        "![grades](grades.png)",
        "",
        "## Latency",
        "",
        "![latency](latency.png)",
        "",
        "## Per question",
        "",
        "Each question's scores (0 red, 1 green; grey: does not apply), hardest first. Judges' 1-5 "
        "scores are shown as (score - 1) / 4. The ten hardest:",
        "",
        *hardest_table(records),
        "![per question](questions.png)",
        "",
    ]


def _sweep(sweep_rows: Sequence[dict[str, float]], lower: float) -> list[str]:
    """The threshold sweep's best rows, and answers from documents against confidently wrong as the
    upper threshold moves at the configured lower one."""
    return [
        "## Threshold sweep (from the recorded grades; defaults are not changed)",
        "",
        "| upper | lower | routing.accuracy | ambiguous share | from documents | confidently wrong |",
        "|---|---|---|---|---|---|",
        *(
            f"| {r['upper']:.2f} | {r['lower']:.2f} | {r['routing.accuracy']:.3f} | "
            f"{r['ambiguous_share']:.3f} | {r['answer.from_documents']:.3f} | "
            f"{r['answer.confidently_wrong']:.3f} |"
            for r in sweep_rows[:15]
        ),
        "",
        "Answered from documents against confidently wrong as the upper threshold moves (lower fixed "
        "at the setting; answers as recorded):",
        "",
        "| upper | from documents | confidently wrong |",
        "|---|---|---|",
        *(
            f"| {r['upper']:.2f} | {r['answer.from_documents']:.3f} | {r['answer.confidently_wrong']:.3f} |"
            for r in sorted(
                (r for r in sweep_rows if abs(r["lower"] - lower) < 1e-9), key=lambda r: r["upper"]
            )
        ),
        "",
    ]


_KIND_HEADERS = {
    "questions": "questions",
    "routing.accuracy": "routing",
    "retrieval.recall_at_5": "recall@5",
    "retrieval.precision_at_5": "precision@5",
    "retrieval.ndcg_at_5": "nDCG@5",
    "retrieval.mrr_at_10": "MRR@10",
    "answer.contains_gold": "contains gold",
    "answer.from_documents": "from documents",
    "answer.confidently_wrong": "confidently wrong",
    "answer.form_defect": "form defect",
}


def kind_table(metrics: dict[str, float]) -> list[str]:
    """The by_kind.<kind>.<metric> values as a Markdown table (no lines when there are none), the
    judges' means in columns of their own when they ran."""
    keys = [k for k in metrics if k.startswith("by_kind.")]
    kinds = list(dict.fromkeys(k.split(".")[1] for k in keys))
    if not kinds:
        return []
    judges = sorted({".".join(k.split(".")[2:]) for k in keys if k.split(".")[2] == "judge"})
    columns = [*KIND_METRICS, *judges]
    header = ["kind", *(_KIND_HEADERS.get(c, c) for c in columns)]
    rows = [
        "| " + " | ".join(header) + " |",
        "|---" * len(header) + "|",
    ]
    for kind in kinds:
        cells = [kind]
        for m in columns:
            value = metrics.get(f"by_kind.{kind}.{m}")
            cells.append("–" if value is None else _fmt(value))
        rows.append("| " + " | ".join(cells) + " |")
    return ["## By kind", "", *rows, ""]


def _fmt(v: float) -> str:
    return str(v) if isinstance(v, int) else f"{v:.3f}"
