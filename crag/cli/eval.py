"""python -m crag.cli.eval DATASET_DIR --out OUT_DIR [--limit N] [--sweep]
python -m crag.cli.eval compare RUN_A RUN_B [--out FILE]
python -m crag.cli.eval --check DATASET_DIR

Builds a fresh index from DATASET_DIR/corpus, serves DATASET_DIR/web_fixtures.jsonl from a fake
SerpAPI on 127.0.0.1, runs every question through the bot's engine and writes results.jsonl,
metrics.json and report.md (with PNG plots) to OUT_DIR. `compare` lists what got better and worse
from one such run to another, question by question (crag/eval/compare.py), and writes compare.md.
`--check` says whether a set holds to the rules in its rules.toml (crag/eval/check_set.py): each
problem on a line and exit status 1, or one OK line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path

from tqdm import tqdm

from crag.config.engine_settings import CragSettings
from crag.eval.check_set import SetError, check_set
from crag.eval.compare import RunError, as_markdown, as_text, compare_runs
from crag.eval.dataset import after_previous, load_dataset
from crag.eval.metrics import sweep
from crag.eval.report import kind_table, write_report
from crag.eval.runner import evaluate

# 0.50 .. 0.95, then finer near 1: where answering from documents trades against confident errors.
SWEEP_UPPER = [round(0.5 + 0.05 * i, 2) for i in range(10)] + [0.97, 0.98, 0.99]
SWEEP_LOWER = [round(0.1 + 0.05 * i, 2) for i in range(13)]  # 0.10 .. 0.70


def compare(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m crag.cli.eval compare", description="What got better and worse from RUN_A to RUN_B."
    )
    parser.add_argument("run_a", type=Path, help="the earlier run's output folder (with results.jsonl)")
    parser.add_argument("run_b", type=Path, help="the later run's output folder")
    parser.add_argument("--out", type=Path, default=None, help="Markdown file (default RUN_B/compare.md)")
    args = parser.parse_args(argv)
    try:
        comparison = compare_runs(args.run_a, args.run_b)
    except RunError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = args.out or args.run_b / "compare.md"
    try:
        out.write_text(as_markdown(comparison), "utf-8")
    except OSError as exc:
        print(f"error: cannot write {out}: {exc.strerror}", file=sys.stderr)
        return 2
    print(as_text(comparison), end="")
    print(f"written: {out}")
    return 0


def check(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m crag.cli.eval --check",
        description="Whether an evaluation set holds to the rules in its rules.toml.",
    )
    parser.add_argument("dataset", type=Path, help="folder with rules.toml, corpus/ and the two JSONL files")
    args = parser.parse_args(argv)
    try:
        verdict = check_set(args.dataset)
    except (SetError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if verdict.problems:
        print(*verdict.problems, sep="\n")
        print(f"FAILED: {args.dataset}: {len(verdict.problems)} problem(s)")
        return 1
    print(verdict.summary(args.dataset))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["compare"]:
        return compare(argv[1:])
    if argv[:1] == ["--check"]:
        return check(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m crag.cli.eval",
        description=__doc__.split("\n\n")[1],
        epilog="python -m crag.cli.eval compare RUN_A RUN_B: what got better and worse between two runs; "
        "python -m crag.cli.eval --check DATASET_DIR: whether a set holds to its rules.toml",
    )
    parser.add_argument("dataset", type=Path, help="folder with corpus/, questions.jsonl, web_fixtures.jsonl")
    parser.add_argument("--out", type=Path, required=True, help="output folder (index, results, report)")
    parser.add_argument("--limit", type=int, default=None, help="evaluate only the first N questions")
    parser.add_argument("--sweep", action="store_true", help="report routing for other threshold pairs")
    parser.add_argument(
        "--after-previous",
        action="store_true",
        help="ask each question without a history after the one before it in the file, as one conversation",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    try:
        dataset = load_dataset(args.dataset)
        if args.after_previous:
            dataset = after_previous(dataset)
        settings = CragSettings()
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    total = min(len(dataset.questions), args.limit or len(dataset.questions))
    with tqdm(total=total, unit="q", file=sys.stderr, desc=dataset.root.name) as bar:
        metrics, records = asyncio.run(
            evaluate(dataset, args.out, settings, args.limit, lambda done, _: bar.update(done - bar.n))
        )
    sweep_rows = None
    if args.sweep:
        pairs = [(u, lo) for u in SWEEP_UPPER for lo in SWEEP_LOWER if lo <= u]
        sweep_rows = sweep(records, pairs)
        (args.out / "sweep.json").write_text(json.dumps(sweep_rows, indent=1), "utf-8")
    providers = json.loads((args.out / "providers.json").read_text("utf-8"))
    report = write_report(
        args.out,
        dataset.root.name,
        metrics,
        records,
        settings.upper_threshold,
        settings.lower_threshold,
        providers,
        sweep_rows,
    )
    overall = {k: v for k, v in metrics.items() if not k.startswith("by_kind.")}
    width = max(len(k) for k in overall)
    for key, value in overall.items():
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        print(f"{key:<{width}}  {shown}")
    for line in kind_table(metrics):
        print(line)
    if sweep_rows:
        best = sweep_rows[0]
        print(
            f"sweep: best routing.accuracy {best['routing.accuracy']:.3f} at upper {best['upper']:.2f} / "
            f"lower {best['lower']:.2f} (defaults unchanged: {settings.upper_threshold} / "
            f"{settings.lower_threshold})"
        )
    print(f"report: {report}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
