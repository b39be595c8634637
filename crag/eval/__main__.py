"""python -m crag.eval DATASET_DIR --out OUT_DIR [--limit N]"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from tqdm import tqdm

from crag.eval.dataset import load_dataset
from crag.eval.runner import evaluate
from crag.settings import CragSettings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m crag.eval", description=__doc__)
    parser.add_argument("dataset", type=Path, help="folder with corpus/, questions.jsonl, web_fixtures.jsonl")
    parser.add_argument("--out", type=Path, required=True, help="output folder (index, results, metrics)")
    parser.add_argument("--limit", type=int, default=None, help="evaluate only the first N questions")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        dataset = load_dataset(args.dataset)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    bar = tqdm(total=min(len(dataset.questions), args.limit or 10**9), unit="q", file=sys.stderr)

    def progress(done: int, total: int) -> None:
        bar.update(done - bar.n)

    metrics, _ = asyncio.run(evaluate(dataset, args.out, CragSettings(), args.limit, progress))
    bar.close()
    width = max(len(k) for k in metrics)
    for key, value in metrics.items():
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        print(f"{key:<{width}}  {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
