"""Fit the local grader's logistic weights and rubric anchors on evaluation datasets.

    python bench/fit_grader.py ../shared/eval/jsquad-dev ../shared/eval/squad-dev

For every question, the engine's own retrieval gives the top-k chunks; a chunk is a positive
example when it comes from the gold file and holds a gold answer. A first logistic model is fitted
on all chunks of all datasets together. Routing, though, only looks at each question's best chunk,
so the model is then refitted on one chunk per question (multiple-instance learning): for an
answerable question its best-scoring answer-holding chunk (or its best chunk when none holds the
answer) labelled 1, for a question the corpus cannot answer its best-scoring chunk labelled 0,
re-picking the chunks with the new weights a few times. The two logit anchors (score 0.8 and 0.4)
are then chosen to maximise the mean routing accuracy over the datasets. It prints the constants to paste into
crag/grade/local.py and the routing accuracy each dataset would get. Run it by hand after changing
features; never fit on a holdout set.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crag.eval.dataset import load_dataset
from crag.eval.metrics import contains_any
from crag.factory import build_engine, open_local_index
from crag.grade.local import LocalGrader
from crag.settings import CragSettings
from crag.text.question import asks_for_number

# Per question: answerable?, and its retrieved chunks as (features, holds a gold answer).
Rows = list[tuple[bool, list[tuple[list[float], bool]]]]


async def collect(dataset_dir: Path, work: Path) -> Rows:
    ds = load_dataset(dataset_dir)
    settings = CragSettings(CRAG_DOCS_DIR=str(ds.corpus), CRAG_INDEX_DIR=str(work / ds.root.name))
    index, _ = open_local_index(settings)
    engine = build_engine(settings, index)
    grader = engine.grader
    assert isinstance(grader, LocalGrader)
    rows = []
    for q in ds.questions:
        hits = await engine.retriever.search(await engine.rewriter.rewrite(q.question, []), settings.top_k)
        query = grader.query(q.question)
        wants = asks_for_number(q.question)
        chunks = []
        for g in hits:
            vec = grader.features(query, g.chunk, wants).vector()
            positive = g.chunk.file == q.gold_file and contains_any(
                " ".join([*g.chunk.headers, g.chunk.text]), q.answers
            )
            chunks.append((vec, positive))
        rows.append((q.in_corpus, chunks))
    return rows


def fit(x: np.ndarray, y: np.ndarray, l2: float = 1.0) -> np.ndarray:
    xb = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(xb.shape[1])
    for _ in range(100):  # Newton's method on the L2-regularised log-likelihood
        p = 1 / (1 + np.exp(-np.clip(xb @ w, -30, 30)))
        hess = xb.T @ (xb * (p * (1 - p))[:, None]) + l2 * np.eye(len(w))
        w -= np.linalg.solve(hess, xb.T @ (p - y) + l2 * w)
    return w


def refit_on_best_chunks(w: np.ndarray, rows: Rows, rounds: int = 5) -> np.ndarray:
    """Multiple-instance refit: one example per question, the chunk routing would look at."""
    for _ in range(rounds):
        xs, ys = [], []
        for inside, chunks in rows:
            if not chunks:
                continue
            x = np.array([v for v, _ in chunks])
            z = np.hstack([x, np.ones((len(x), 1))]) @ w
            holding = [i for i, (_, positive) in enumerate(chunks) if positive]
            pick = max(holding, key=lambda i: z[i]) if inside and holding else int(np.argmax(z))
            xs.append(x[pick])
            ys.append(1.0 if inside else 0.0)
        w = fit(np.array(xs), np.array(ys))
    return w


def question_logits(w: np.ndarray, rows: Rows) -> np.ndarray:
    out = []
    for _, chunks in rows:
        if not chunks:
            out.append(-50.0)
            continue
        x = np.array([v for v, _ in chunks])
        out.append(float((np.hstack([x, np.ones((len(x), 1))]) @ w).max()))
    return np.array(out)


def accuracy(z: np.ndarray, inside: np.ndarray, upper: float, band: float) -> float:
    """Routing accuracy: answerable questions at or above upper, the others below upper - band."""
    return float((((z >= upper) & inside).sum() + ((z < upper - band) & ~inside).sum()) / len(z))


def train(data: dict[str, Rows], band: float) -> tuple[np.ndarray, float]:
    """Weights, then the upper anchor maximising the mean routing accuracy over the datasets."""
    x = np.array([v for rows in data.values() for _, chunks in rows for v, _ in chunks])
    y = np.array([p for rows in data.values() for _, chunks in rows for _, p in chunks], dtype=float)
    w = refit_on_best_chunks(fit(x, y), [row for rows in data.values() for row in rows])
    logits = {name: question_logits(w, rows) for name, rows in data.items()}
    inside = {name: np.array([r[0] for r in rows]) for name, rows in data.items()}
    uppers = np.arange(-4.0, 4.0, 0.05)
    means = [np.mean([accuracy(logits[n], inside[n], u, band) for n in data]) for u in uppers]
    return w, float(uppers[int(np.argmax(means))])


def cross_validate(data: dict[str, Rows], band: float, folds: int) -> dict[str, float]:
    """Routing accuracy on questions the fit never saw: each question is held out once."""
    rng = np.random.default_rng(0)
    fold_of = {name: rng.integers(0, folds, len(rows)) for name, rows in data.items()}
    hits = {name: 0.0 for name in data}
    for k in range(folds):
        seen = {n: [r for r, f in zip(rows, fold_of[n], strict=True) if f != k] for n, rows in data.items()}
        held = {n: [r for r, f in zip(rows, fold_of[n], strict=True) if f == k] for n, rows in data.items()}
        w, upper = train(seen, band)
        for n, rows in held.items():
            if rows:
                z = question_logits(w, rows)
                hits[n] += accuracy(z, np.array([r[0] for r in rows]), upper, band) * len(rows)
    return {n: hits[n] / len(rows) for n, rows in data.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("datasets", nargs="+", type=Path)
    parser.add_argument("--band", type=float, default=0.2, help="logit width of the ambiguous band")
    parser.add_argument("--table", action="store_true", help="print accuracy for a range of anchors")
    parser.add_argument(
        "--cv", type=int, default=0, metavar="K", help="also report K-fold cross-validated accuracy"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = {d.name: asyncio.run(collect(d, Path(tmp))) for d in args.datasets}
    w, upper = train(data, args.band)
    logits = {name: question_logits(w, rows) for name, rows in data.items()}
    inside = {name: np.array([r[0] for r in rows]) for name, rows in data.items()}
    print(f"WEIGHTS = ({', '.join(f'{v:.3f}' for v in w[:-1])})")
    print(f"BIAS = {w[-1]:.3f}")
    print(f"LOGIT_UPPER = {upper:.2f}")
    print(f"LOGIT_LOWER = {upper - args.band:.2f}")
    for name, z in logits.items():
        print(f"routing accuracy {name}: {accuracy(z, inside[name], upper, args.band):.3f}")
    if args.cv > 1:
        for name, acc in cross_validate(data, args.band, args.cv).items():
            print(f"routing accuracy {name}, {args.cv}-fold cross-validated: {acc:.3f}")
    if args.table:
        for u in np.arange(-2.0, 2.0, 0.1):
            cells = "  ".join(f"{n} {accuracy(z, inside[n], u, args.band):.3f}" for n, z in logits.items())
            print(f"upper {u:6.2f}: {cells}")


if __name__ == "__main__":
    main()
