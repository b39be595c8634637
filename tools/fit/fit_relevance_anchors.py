"""Choose the relevance model's anchors: the logits graded 0.8 ("answers it") and 0.4 ("does not").

    CRAG_GRADER=local python -m crag.cli.eval data/eval/fit-minami --out eval_out/anchors/fit-minami
    python tools/fit/fit_relevance_anchors.py eval_out/anchors/fit-minami [...] --run-upper 6 --run-lower -6

Reads eval runs made with the reading grader under the anchors given (--run-upper / --run-lower: the
[relevance] anchors in crag/stages/grade/weights.toml at the time of the run; wide ones, such as 6 and
-6, keep every logit in the linear band, so each grade gives its logit back to 0.03). For each question,
its best passage's logit and whether that passage is from the gold file; then, over a grid of logits:

- upper: the lowest at which the green proxy stays at most --max-wrong on every run: a question whose
  best passage reaches it would be answered from documents alone, wrongly when the documents do not
  answer it or that passage is not from a gold file;
- lower: under that upper, the one that best tells the answerable questions (best passage at or over
  it: answered from the documents, green or checked) from the others (under it: the web), averaged
  over the runs. (Routing accuracy cannot choose it: an answerable question counts as routed right
  only at or over upper, so it would always put lower at upper.)

Run it on fitting sets only (fit-minami: the model was trained on sample-docs and fit-hokuyo); check
the result with real runs of the eval CLI. Prints the pair to write into weights.toml.
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


def questions(run: Path, upper: float, lower: float) -> list[tuple[float, bool, bool]]:
    """(best logit, answerable, best passage from a gold file) per question without a history."""
    out = []
    for line in (run / "results.jsonl").read_text("utf-8").splitlines():
        r = json.loads(line)
        if r.get("history") or not r["scores"]:
            if not r["scores"]:
                out.append((-50.0, r["expected_branch"] == "correct", False))
            continue
        best = max(r["scores"], key=lambda s: s["grade"])
        gold = {
            Path(f).name for f in (r.get("gold_files") or ([r["gold_file"]] if r.get("gold_file") else []))
        }
        out.append(
            (
                logit_of(best["grade"], upper, lower),
                r["expected_branch"] == "correct",
                Path(best["file"]).name in gold,
            )
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--run-upper", type=float, required=True)
    ap.add_argument("--run-lower", type=float, required=True)
    ap.add_argument("--max-wrong", type=float, default=0.02)
    args = ap.parse_args()
    runs = {run.name: questions(run, args.run_upper, args.run_lower) for run in args.runs}
    grid = np.round(np.arange(-6.0, 6.01, 0.1), 2)

    def wrong(qs: list[tuple[float, bool, bool]], upper: float) -> float:
        return sum(1 for z, answerable, gold in qs if z >= upper and not (answerable and gold)) / len(qs)

    def accuracy(qs: list[tuple[float, bool, bool]], upper: float, lower: float) -> float:
        return sum(1 for z, answerable, _ in qs if (z >= upper if answerable else z < lower)) / len(qs)

    upper = next(float(u) for u in grid if all(wrong(qs, u) <= args.max_wrong for qs in runs.values()))

    def separates(qs: list[tuple[float, bool, bool]], lower: float) -> float:
        return sum(1 for z, answerable, _ in qs if (z >= lower) == answerable) / len(qs)

    lower = max(
        (float(v) for v in grid if v <= upper),
        key=lambda v: (np.mean([separates(qs, v) for qs in runs.values()]), v),
    )
    for name, qs in runs.items():
        green = sum(1 for z, a, _ in qs if a and z >= upper) / max(1, sum(1 for _, a, _ in qs if a))
        print(
            f"{name}: {len(qs)} questions; at upper {upper:+.1f} / lower {lower:+.1f}: green proxy "
            f"wrong {wrong(qs, upper):.3f}, routing {accuracy(qs, upper, lower):.3f}, "
            f"green of answerable {green:.3f}"
        )
    print(f"upper = {upper:.2f}\nlower = {lower:.2f}")


if __name__ == "__main__":
    main()
