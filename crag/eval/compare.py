"""python -m crag.cli.eval compare RUN_A RUN_B [--out FILE]

What got better and what got worse from run A to run B, question by question (matched by id in
each run's results.jsonl): the answer containing the gold, the branch being the expected one, a
confidently wrong answer (green badge, wrong fact) and the latency. A latency counts as changed
when it moved by more than LATENCY_SHARE of A's and more than LATENCY_MS: local turns of a few
milliseconds jitter by more than half between runs, LLM turns by a few hundred milliseconds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crag.eval.metrics import contains_any, percentile

LATENCY_SHARE = 0.3
LATENCY_MS = 200.0


class RunError(ValueError):
    """A run folder that cannot be compared: missing or malformed results.jsonl."""


@dataclass(frozen=True)
class Outcome:
    """One question in one run, as compared."""

    id: str
    question: str
    kind: str
    expected: str
    branch: str
    contains_gold: bool | None  # None: no gold answer to check against
    confidently_wrong: bool
    latency_ms: float

    @property
    def routed_right(self) -> bool:
        return self.branch == self.expected


@dataclass(frozen=True)
class Change:
    what: str
    before: str
    after: str
    better: bool


@dataclass(frozen=True)
class QuestionDiff:
    a: Outcome
    b: Outcome
    changes: tuple[Change, ...]

    @property
    def verdict(self) -> str:
        ups = any(c.better for c in self.changes)
        downs = any(not c.better for c in self.changes)
        return "mixed" if ups and downs else "better" if ups else "worse" if downs else "same"


@dataclass(frozen=True)
class Comparison:
    run_a: Path
    run_b: Path
    diffs: list[QuestionDiff]
    only_a: list[str]
    only_b: list[str]

    def of(self, verdict: str) -> list[QuestionDiff]:
        return [d for d in self.diffs if d.verdict == verdict]

    def summary(self) -> str:
        a = [d.a for d in self.diffs]
        b = [d.b for d in self.diffs]
        counts = ", ".join(f"{len(self.of(v))} {v}" for v in ("better", "worse", "mixed", "same"))
        return (
            f"{len(self.diffs)} questions in both runs: {counts}. "
            f"Contains gold {_count(a, 'gold')} -> {_count(b, 'gold')}, "
            f"routed right {_count(a, 'routed')} -> {_count(b, 'routed')}, "
            f"confidently wrong {_count(a, 'wrong')} -> {_count(b, 'wrong')}, "
            f"latency p50 {_p50(a):.0f} -> {_p50(b):.0f} ms"
            + (f"; only in A: {len(self.only_a)}" if self.only_a else "")
            + (f"; only in B: {len(self.only_b)}" if self.only_b else "")
            + "."
        )


def load_run(run: Path) -> dict[str, Outcome]:
    path = run / "results.jsonl"
    if not path.is_file():
        raise RunError(f"{run} is not an evaluation run (no results.jsonl)")
    out: dict[str, Outcome] = {}
    for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            outcome = _outcome(json.loads(line))
        except (ValueError, KeyError, TypeError) as exc:
            raise RunError(f"{path}:{number}: not a result row ({type(exc).__name__}: {exc})") from None
        out[outcome.id] = outcome
    return out


def _outcome(row: dict[str, Any]) -> Outcome:
    groups = row.get("answers_all")
    golds = row.get("gold_answers") or []
    answer = str(row["answer"])
    if groups:
        contains: bool | None = all(contains_any(answer, g) for g in groups)
    elif golds:
        contains = contains_any(answer, golds)
    else:
        contains = None
    return Outcome(
        id=str(row["id"]),
        question=str(row.get("question", "")),
        kind=str(row.get("kind") or ""),
        expected=str(row["expected_branch"]),
        branch=str(row["branch"]),
        contains_gold=contains,
        confidently_wrong=bool(row.get("confidently_wrong", False)),
        latency_ms=float(row["latency_ms"]),
    )


def changes(a: Outcome, b: Outcome) -> tuple[Change, ...]:
    out: list[Change] = []
    if a.contains_gold is not None and b.contains_gold is not None and a.contains_gold != b.contains_gold:
        out.append(Change("contains gold", _yes(a.contains_gold), _yes(b.contains_gold), b.contains_gold))
    if a.branch != b.branch and a.routed_right != b.routed_right:
        out.append(Change(f"branch (expected {b.expected})", a.branch, b.branch, b.routed_right))
    if a.confidently_wrong != b.confidently_wrong:
        out.append(
            Change(
                "confidently wrong",
                _yes(a.confidently_wrong),
                _yes(b.confidently_wrong),
                not b.confidently_wrong,
            )
        )
    moved = b.latency_ms - a.latency_ms
    if abs(moved) > LATENCY_MS and abs(moved) > LATENCY_SHARE * a.latency_ms:
        out.append(Change("latency", f"{a.latency_ms:.0f} ms", f"{b.latency_ms:.0f} ms", moved < 0))
    return tuple(out)


def compare_runs(run_a: Path, run_b: Path) -> Comparison:
    a, b = load_run(run_a), load_run(run_b)
    both = [qid for qid in a if qid in b]
    return Comparison(
        run_a=run_a,
        run_b=run_b,
        diffs=[QuestionDiff(a[q], b[q], changes(a[q], b[q])) for q in both],
        only_a=[q for q in a if q not in b],
        only_b=[q for q in b if q not in a],
    )


def as_text(c: Comparison) -> str:
    lines = [f"compare {c.run_a} -> {c.run_b}", c.summary()]
    for verdict in ("better", "worse", "mixed"):
        diffs = c.of(verdict)
        if diffs:
            lines.append(f"\n{verdict} ({len(diffs)}):")
            lines += [f"  {d.b.id:<12} {_changed(d)}   {_short(d.b.question)}" for d in diffs]
    return "\n".join(lines) + "\n"


def as_markdown(c: Comparison) -> str:
    lines = [f"# Comparison: `{c.run_a}` -> `{c.run_b}`", "", c.summary(), ""]
    for verdict in ("better", "worse", "mixed"):
        diffs = c.of(verdict)
        lines += [f"## {verdict.capitalize()} ({len(diffs)})", ""]
        if not diffs:
            lines += ["None.", ""]
            continue
        lines += ["| id | kind | question | what changed |", "|---|---|---|---|"]
        lines += [
            f"| {d.b.id} | {d.b.kind} | {_cell(_short(d.b.question))} | {_cell(_changed(d))} |" for d in diffs
        ]
        lines.append("")
    for name, ids in (("Only in A", c.only_a), ("Only in B", c.only_b)):
        if ids:
            lines += [f"## {name} ({len(ids)})", "", ", ".join(ids), ""]
    return "\n".join(lines)


def _changed(d: QuestionDiff) -> str:
    return "; ".join(f"{c.what} {c.before} -> {c.after}" for c in d.changes)


def _count(outcomes: list[Outcome], what: str) -> int:
    if what == "gold":
        return sum(o.contains_gold is True for o in outcomes)
    if what == "routed":
        return sum(o.routed_right for o in outcomes)
    return sum(o.confidently_wrong for o in outcomes)


def _p50(outcomes: list[Outcome]) -> float:
    return percentile([o.latency_ms for o in outcomes], 0.5)


def _yes(value: bool) -> str:
    return "yes" if value else "no"


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
