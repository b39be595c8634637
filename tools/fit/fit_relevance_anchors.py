"""Choose the relevance model's anchors: the logits graded 0.8 ("answers it") and 0.4 ("does not").

    CRAG_GRADER=local python -m crag.cli.eval data/eval/fit-minami --out eval_out/anchors/fit-minami
    python tools/fit/fit_relevance_anchors.py eval_out/anchors/fit-minami [...] --run-upper 6 --run-lower -6

Reads eval runs made with the reading grader under the anchors given (--run-upper / --run-lower: the
[relevance] anchors in crag/stages/grade/weights.toml at the time of the run; wide ones, such as 6 and
-6, keep every logit in the linear band, so each grade gives its logit back to 0.03). For each question,
its passages' logits and topic grades (the feature grader's) and which are from a gold file. For each
topic weight given (--topic-weights: a passage's score is its logit plus the weight times its topic
grade), over a grid of scores:

- upper: the lowest at which the green proxy stays at most --max-wrong on every run: a question whose
  best passage reaches it would be answered from documents alone, wrongly when the documents do not
  answer it or that passage is not from a gold file;
- lower: under that upper, the one that best tells the answerable questions (best passage at or over
  it: answered from the documents, green or checked) from the others (under it: the web), averaged
  over the runs. (Routing accuracy cannot choose it: an answerable question counts as routed right
  only at or over upper, so it would always put lower at upper.)

Run it on fitting sets only (fit-minami: the model was trained on sample-docs and fit-hokuyo); check
the result with real runs of the eval CLI. The weight kept is the one whose anchors give the most
answerable questions green (the proxy); prints it with its pair, to write into weights.toml.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from crag.core.models import RUBRIC  # noqa: E402


def logit_of(grade: float, upper: float, lower: float) -> float:
    """The inverse of crag/stages/grade/local.py calibrate()."""
    high, low = RUBRIC.upper, RUBRIC.lower
    if grade >= high:
        return upper - math.log(max(1e-6, 1.0 - (grade - high) / (1.0 - high)))
    if grade <= low:
        return lower + math.log(max(1e-6, grade / low))
    return lower + (grade - low) / (high - low) * (upper - lower)


Passage = tuple[float, float, bool]  # (logit, topic, from a gold file)
Question = tuple[list[Passage], bool]  # (its passages, answerable)


def questions(run: Path, upper: float, lower: float) -> list[Question]:
    """Each question without a history: its passages' logits, topic grades and whether each is from
    a gold file; and whether the question is answerable. A passage the reader did not read (graded
    under 0.4 from its topic) comes back under the lower anchor, as it is graded."""
    out: list[Question] = []
    for line in (run / "results.jsonl").read_text("utf-8").splitlines():
        r = json.loads(line)
        if r.get("history"):
            continue
        gold = {
            Path(f).name for f in (r.get("gold_files") or ([r["gold_file"]] if r.get("gold_file") else []))
        }
        passages = [
            (logit_of(s["grade"], upper, lower), float(s.get("topic", 0.0)), Path(s["file"]).name in gold)
            for s in r["scores"]
        ]
        out.append((passages, r["expected_branch"] == "correct"))
    return out


def best(qs: list[Question], weight: float) -> list[tuple[float, bool, bool]]:
    """Per question: the best passage's score (logit + weight * topic), answerable, best from gold."""
    out = []
    for passages, answerable in qs:
        if not passages:
            out.append((-50.0, answerable, False))
            continue
        z, _, gold = max(((z + weight * t, t, g) for z, t, g in passages), key=lambda x: x[0])
        out.append((z, answerable, gold))
    return out


def wrong(qs: list[tuple[float, bool, bool]], upper: float) -> float:
    return sum(1 for z, answerable, gold in qs if z >= upper and not (answerable and gold)) / len(qs)


def accuracy(qs: list[tuple[float, bool, bool]], upper: float, lower: float) -> float:
    return sum(1 for z, answerable, _ in qs if (z >= upper if answerable else z < lower)) / len(qs)


def separates(qs: list[tuple[float, bool, bool]], lower: float) -> float:
    return sum(1 for z, answerable, _ in qs if (z >= lower) == answerable) / len(qs)


def green(qs: list[tuple[float, bool, bool]], upper: float) -> float:
    return sum(1 for z, a, _ in qs if a and z >= upper) / max(1, sum(1 for _, a, _ in qs if a))


def anchors(runs: dict[str, list[Question]], weight: float, max_wrong: float) -> tuple[float, float]:
    grid = np.round(np.arange(-8.0, 14.01, 0.1), 2)
    scored = [best(qs, weight) for qs in runs.values()]
    upper = next((float(u) for u in grid if all(wrong(qs, u) <= max_wrong for qs in scored)), float(grid[-1]))
    lower = max(
        (float(v) for v in grid if v <= upper),
        key=lambda v: (np.mean([separates(qs, v) for qs in scored]), v),
    )
    return upper, lower


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--run-upper", type=float, required=True)
    ap.add_argument("--run-lower", type=float, required=True)
    ap.add_argument("--run-topic-weight", type=float, default=0.0, help="the topic_weight of the runs")
    ap.add_argument("--max-wrong", type=float, default=0.02)
    ap.add_argument(
        "--topic-weights", type=float, nargs="*", default=[0.0], help="topic weights to choose from"
    )
    args = ap.parse_args()
    runs = {run.name: questions(run, args.run_upper, args.run_lower) for run in args.runs}
    # The runs' scores hold their own topic term: take it out to get the model's logits back.
    runs = {
        name: [([(z - args.run_topic_weight * t, t, g) for z, t, g in ps], a) for ps, a in qs]
        for name, qs in runs.items()
    }
    chosen: tuple[float, float, float, float] | None = None
    for weight in args.topic_weights:
        upper, lower = anchors(runs, weight, args.max_wrong)
        mean_green = float(np.mean([green(best(qs, weight), upper) for qs in runs.values()]))
        for name, qs in runs.items():
            b = best(qs, weight)
            print(
                f"{name}: topic weight {weight:g}, upper {upper:+.1f} / lower {lower:+.1f}: green proxy "
                f"wrong {wrong(b, upper):.3f}, routing {accuracy(b, upper, lower):.3f}, "
                f"green of answerable {green(b, upper):.3f}"
            )
        if chosen is None or mean_green > chosen[0] + 1e-9:
            chosen = (mean_green, weight, upper, lower)
    assert chosen is not None
    _, weight, upper, lower = chosen
    print(f"upper = {upper:.2f}\nlower = {lower:.2f}\ntopic_weight = {weight:g}")


if __name__ == "__main__":
    main()
