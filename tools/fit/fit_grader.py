"""Fit the local grader's logistic weights and rubric anchors on evaluation datasets.

    python tools/fit/fit_grader.py data/eval/jsquad-dev data/eval/squad-dev

For every question, the engine's own retrieval gives the top-k chunks; a chunk is a positive
example when it comes from the gold file and holds a gold answer. A first logistic model is fitted
on all chunks of all datasets together. Routing, though, only looks at each question's best chunk,
so the model is then refitted on one chunk per question (multiple-instance learning): for an
answerable question its best-scoring answer-holding chunk (or its best chunk when none holds the
answer) labelled 1, for a question the corpus cannot answer its best-scoring chunk labelled 0,
re-picking the chunks with the new weights a few times. The two logit anchors (score 0.8 and 0.4)
are then chosen to maximise the mean routing accuracy over the datasets. It prints the constants to paste into
crag/stages/grade/local.py and the routing accuracy each dataset would get. Run it by hand after changing
features; never fit on a holdout set.

    python tools/fit/fit_grader.py --semantic A B C --report D [--max-wrong 0.05]

`--semantic` fits the model over lexical and semantic evidence (the local index's embeddings, built
first) and prints the model as a table of crag/stages/grade/weights.toml. `--report` names datasets
that are scored but never fitted
on. The upper anchor is the one with the best mean routing accuracy among those whose confidently-wrong
proxy (a question routed to the documents alone whose best chunk does not hold the answer, or that
the corpus cannot answer) stays within `--max-wrong` on every fitted dataset.

`--per-chunk` keeps the per-chunk model (the odds that a chunk holds the answer) without the routing
refit: it picks the answer-holding chunk more often (business-dev top-1 0.60 -> 0.73 with the answer-
kind signal), which is what a confidently-wrong limit rewards. The proxy misses answers that quote the
wrong sentence of the right chunk: check the anchor with `python -m crag.cli.eval --sweep`.

`--ranked W` adds a listwise term of weight W to the per-chunk fit (ranked_fit): for each answerable
question, the log-likelihood that its answer-holding chunks come first among its retrieved chunks,
every dataset weighing the same. `--leave-one-out` also fits on all fitted datasets but one and
reports how often the held one's answer chunk leads (the measure ranked_fit was chosen on).
`--lower-as-shipped` chooses the lower anchor that keeps as many answer chunks on every fitted
dataset as the shipped model does at its own: a refit that changes the grades' scale keeps the
number of answers that can quote the gold, instead of a new operating point nobody has checked.

`--floor-on NAME` chooses the lower anchor on one fitted dataset instead of `upper - band`: where the
answerable questions whose best chunk holds the answer and reaches it, minus the unanswerable
questions that reach it, peak (floor()). Pass the set written as employees ask (data/eval/sample-docs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from crag.config.engine_settings import CragSettings
from crag.eval.dataset import load_dataset
from crag.eval.metrics import contains_any
from crag.runtime.factory import build_engine, open_local_index
from crag.stages.grade.local import LEXICAL_FEATURES, SEMANTIC_FEATURES, LocalGrader

# Per question: answerable?, and its retrieved chunks as (features, holds a gold answer).
Rows = list[tuple[bool, list[tuple[list[float], bool]]]]


async def collect(dataset_dir: Path, work: Path, semantic: bool) -> Rows:
    ds = load_dataset(dataset_dir)
    settings = CragSettings(
        CRAG_DOCS_DIR=str(ds.corpus),
        CRAG_INDEX_DIR=str(work / ds.root.name),
        CRAG_EMBEDDINGS="local" if semantic else "off",
    )
    index, _ = open_local_index(settings)
    engine = build_engine(settings, index)
    if semantic:
        if index.vectors is None:
            raise SystemExit(f"--semantic: no embeddings for {ds.root.name} ({index.vectors_notice})")
        await index.vectors.build()
    grader = engine.grader
    assert isinstance(grader, LocalGrader)
    rows = []
    for q in ds.questions:
        # As the engine reads the turn: a follow-up is searched and graded with the question it
        # leans on (crag/engine.py), not as the few words the employee typed.
        standalone = engine.rewriter.standalone(q.question, q.history or [])
        query = await engine.rewriter.rewrite(q.question, q.history or [])
        hits = await engine.retriever.search(query, settings.top_k, standalone)
        vectors, used = await grader.feature_rows(standalone, [g.chunk for g in hits], semantic)
        if semantic and hits and not used:
            raise SystemExit(f"--semantic: {ds.root.name} has chunks without vectors")
        groups = q.answers_all or [q.answers]
        chunks = []
        for g, vec in zip(hits, vectors, strict=True):
            text = " ".join([*g.chunk.headers, g.chunk.text])
            positive = g.chunk.file in q.gold_set and any(contains_any(text, group) for group in groups)
            chunks.append((vec, positive))
        rows.append((q.in_corpus, chunks))
    await engine.close()
    return rows


def load_or_collect(dataset_dir: Path, work: Path, semantic: bool, rows_dir: Path | None) -> Rows:
    """The dataset's features, from `rows_dir` when an earlier run kept them (delete to recollect)."""
    cache = (
        rows_dir / f"{dataset_dir.name}-{'semantic' if semantic else 'lexical'}.json" if rows_dir else None
    )
    if cache is not None and cache.is_file():
        return [(bool(a), [(list(v), bool(p)) for v, p in c]) for a, c in json.loads(cache.read_text())]
    rows = asyncio.run(collect(dataset_dir, work, semantic))
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(rows))
    return rows


def fit(x: np.ndarray, y: np.ndarray, l2: float = 1.0) -> np.ndarray:
    return fit_weighted(x, y, np.ones(len(x)), l2)


def fit_weighted(x: np.ndarray, y: np.ndarray, weight: np.ndarray, l2: float = 1.0) -> np.ndarray:
    """The L2-regularised logistic fit, with a weight per example (normalised to a mean of 1)."""
    xb = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(xb.shape[1])
    weight = weight / weight.mean()
    for _ in range(100):  # Newton's method on the weighted, regularised log-likelihood
        p = 1 / (1 + np.exp(-np.clip(xb @ w, -30, 30)))
        hess = xb.T @ (xb * (weight * p * (1 - p))[:, None]) + l2 * np.eye(len(w))
        w -= np.linalg.solve(hess, xb.T @ (weight * (p - y)) + l2 * w)
    return w


def chunk_examples(data: dict[str, Rows]) -> tuple[np.ndarray, np.ndarray]:
    """Every retrieved chunk's features, and whether it holds the answer to an answerable question."""
    x = np.array([v for rows in data.values() for _, chunks in rows for v, _ in chunks])
    y = np.array(
        [p and inside for rows in data.values() for inside, chunks in rows for _, p in chunks], dtype=float
    )
    return x, y


def per_dataset_weights(data: dict[str, Rows]) -> np.ndarray:
    """One weight per chunk example such that every dataset weighs the same in total: 400 questions
    written from their passages must not outvote 121 asked in employees' words."""
    return np.array([1.0 / len(rows) for rows in data.values() for _, chunks in rows for _ in chunks])


def ranked_fit(
    data: dict[str, Rows], rank_weight: float, iterations: int = 1500, step: float = 0.03
) -> np.ndarray:
    """The per-chunk model's log-likelihood plus `rank_weight` times a listwise one: for each
    answerable question, the softmax log-likelihood of its answer-holding chunks among its retrieved
    chunks. Every dataset weighs the same in both (per_dataset_weights). Started from the weighted
    per-chunk fit; Adam, with a small L2 on the weights.

    The per-chunk term alone learns the odds that a chunk holds an answer across all questions, so a
    feature that tells easy questions from hard ones (all the question's words in the corpus) weighs
    as much as one that tells a question's answering chunk from its neighbours; which chunk leads is
    what the answer quotes. The listwise term alone ranks well but loses the grades' level across
    questions (routing compares them with fixed anchors): the sum keeps both."""
    x, y = chunk_examples(data)
    xb = np.hstack([x, np.ones((len(x), 1))])
    chunk_weight = per_dataset_weights(data)
    w = fit_weighted(x, y, chunk_weight)
    chunk_weight = chunk_weight / chunk_weight.sum()
    groups = [
        (np.array([v for v, _ in chunks]), np.array([p for _, p in chunks], dtype=bool), 1.0 / len(rows))
        for rows in data.values()
        for inside, chunks in rows
        if inside and any(p for _, p in chunks) and not all(p for _, p in chunks)
    ]
    if not groups or rank_weight <= 0:
        return w
    width = max(len(pos) for _, pos, _ in groups)
    gx = np.zeros((len(groups), width, xb.shape[1]))
    positive = np.zeros((len(groups), width), dtype=bool)
    present = np.zeros((len(groups), width), dtype=bool)
    for i, (xi, pos, _) in enumerate(groups):
        gx[i, : len(xi), :-1], gx[i, : len(xi), -1] = xi, 1.0
        positive[i, : len(xi)], present[i, : len(xi)] = pos, True
    question_weight = np.array([wt for _, _, wt in groups])
    question_weight /= question_weight.sum()
    first, second = np.zeros_like(w), np.zeros_like(w)
    for t in range(1, iterations + 1):
        p = 1 / (1 + np.exp(-np.clip(xb @ w, -30, 30)))
        grad = xb.T @ (chunk_weight * (p - y))
        z = np.where(present, np.einsum("gkf,f->gk", gx, w), -1e9)
        e = np.exp(z - z.max(axis=1, keepdims=True)) * present
        listwise = e / e.sum(axis=1, keepdims=True) - e * positive / (e * positive).sum(axis=1, keepdims=True)
        grad += rank_weight * np.einsum("gk,gkf->f", listwise * question_weight[:, None], gx)
        grad += 0.001 * np.append(w[:-1], 0.0)
        first = 0.9 * first + 0.1 * grad
        second = 0.999 * second + 0.001 * grad**2
        w = w - step * (first / (1 - 0.9**t)) / (np.sqrt(second / (1 - 0.999**t)) + 1e-8)
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


def best_holds_answer(w: np.ndarray, rows: Rows) -> np.ndarray:
    """Per question: does its top-scoring chunk hold the answer (what an answer would quote)?"""
    out = []
    for _, chunks in rows:
        if not chunks:
            out.append(False)
            continue
        x = np.array([v for v, _ in chunks])
        out.append(chunks[int(np.argmax(np.hstack([x, np.ones((len(x), 1))]) @ w))][1])
    return np.array(out)


def answer_kept(z: np.ndarray, rows: Rows, lower: float) -> float:
    """Share of the answerable questions whose best chunk reaches `lower` and that have an
    answer-holding chunk retrieved: an answer can be written from the kept passages."""
    inside = np.array([r[0] for r in rows])
    holding = np.array([any(p for _, p in chunks) for _, chunks in rows])
    return float(((z >= lower) & inside & holding).sum() / max(1, int(inside.sum())))


def lower_as_shipped(w: np.ndarray, data: dict[str, Rows], semantic: bool) -> float:
    """The highest lower anchor (0.05 steps) at which w keeps, on every dataset, at least the answer
    chunks the shipped model keeps at its own lower anchor."""
    from crag.stages.grade.local import LEXICAL, SEMANTIC

    model = SEMANTIC if semantic else LEXICAL
    if model is None:
        raise SystemExit("--lower-as-shipped: no shipped semantic model")
    shipped = np.array([*model.weights, model.bias])
    wanted = {n: answer_kept(question_logits(shipped, rows), rows, model.lower) for n, rows in data.items()}
    logits = {n: question_logits(w, rows) for n, rows in data.items()}
    for lower in np.arange(2.0, -10.0, -0.05):
        if all(answer_kept(logits[n], rows, lower) >= wanted[n] for n, rows in data.items()):
            return float(lower)
    return -10.0


def leads(w: np.ndarray, rows: Rows) -> float:
    """Share of the answerable questions with an answer-holding chunk retrieved whose top-scoring
    chunk holds the answer: what the answer quotes."""
    holds = best_holds_answer(w, rows)
    can = [i for i, (inside, chunks) in enumerate(rows) if inside and any(p for _, p in chunks)]
    return float(holds[can].mean()) if can else 0.0


def wrong_share(z: np.ndarray, inside: np.ndarray, holds: np.ndarray, upper: float) -> float:
    """Confidently-wrong proxy: routed to the documents alone, but the corpus cannot answer or the
    chunk the answer would come from does not hold it."""
    return float(((z >= upper) & (~inside | ~holds)).sum() / len(z))


def floor(z: np.ndarray, inside: np.ndarray, holds: np.ndarray, upper: float) -> float:
    """The lower anchor: the highest logit below `upper` that maximises the answerable questions
    whose best chunk holds the answer and reaches it (their answer can quote the gold) minus the
    questions the corpus cannot answer that reach it (they are shown a passage that does not answer
    them). Both count one: a passage shown beside the web results, marked as not from the documents
    alone, costs such a question about what it gains an answerable one."""
    best, best_gain = upper, 0
    for lower in np.arange(upper, -8.0, -0.05):
        shown = z >= lower
        gain = int((shown & inside & holds).sum()) - int((shown & ~inside).sum())
        if gain > best_gain:
            best, best_gain = float(lower), gain
    return best


def train(
    data: dict[str, Rows], band: float, max_wrong: float = 1.0, per_chunk: bool = False, ranked: float = 0.0
) -> tuple[np.ndarray, float]:
    """Weights, then the upper anchor maximising the mean routing accuracy over the datasets among
    the anchors that keep the confidently-wrong proxy within max_wrong on every dataset.

    per_chunk: keep the first model, the odds that this chunk holds the answer to an answerable
    question, without the routing refit. It ranks the chunks of a question better (which chunk the
    answer is taken from is what makes an answer wrong), so under a confidently-wrong limit it routes
    more questions right."""
    if ranked:
        w = ranked_fit(data, ranked)
    else:
        w = fit(*chunk_examples(data))
        if not per_chunk:
            w = refit_on_best_chunks(w, [row for rows in data.values() for row in rows])
    logits = {name: question_logits(w, rows) for name, rows in data.items()}
    inside = {name: np.array([r[0] for r in rows]) for name, rows in data.items()}
    holds = {name: best_holds_answer(w, rows) for name, rows in data.items()}
    uppers = np.arange(-4.0, 6.0, 0.05)
    means = [np.mean([accuracy(logits[n], inside[n], u, band) for n in data]) for u in uppers]
    allowed = [all(wrong_share(logits[n], inside[n], holds[n], u) <= max_wrong for n in data) for u in uppers]
    if any(allowed):
        means = [m if ok else -1.0 for m, ok in zip(means, allowed, strict=True)]
    return w, float(uppers[int(np.argmax(means))])


def cross_validate(
    data: dict[str, Rows],
    band: float,
    folds: int,
    max_wrong: float = 1.0,
    per_chunk: bool = False,
    ranked: float = 0.0,
) -> dict[str, float]:
    """Routing accuracy on questions the fit never saw: each question is held out once."""
    rng = np.random.default_rng(0)
    fold_of = {name: rng.integers(0, folds, len(rows)) for name, rows in data.items()}
    hits = {name: 0.0 for name in data}
    for k in range(folds):
        seen = {n: [r for r, f in zip(rows, fold_of[n], strict=True) if f != k] for n, rows in data.items()}
        held = {n: [r for r, f in zip(rows, fold_of[n], strict=True) if f == k] for n, rows in data.items()}
        w, upper = train(seen, band, max_wrong, per_chunk, ranked)
        for n, rows in held.items():
            if rows:
                z = question_logits(w, rows)
                hits[n] += accuracy(z, np.array([r[0] for r in rows]), upper, band) * len(rows)
    return {n: hits[n] / len(rows) for n, rows in data.items()}


def main() -> None:
    args = parser().parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = {d.name: load_or_collect(d, Path(tmp), args.semantic, args.rows) for d in args.datasets}
        held = {d.name: load_or_collect(d, Path(tmp), args.semantic, args.rows) for d in args.report}
    w, upper = train(data, args.band, args.max_wrong, args.per_chunk, args.ranked)
    lower = lower_anchor(args, data, w, upper)
    print_model(w, upper, lower, args.semantic)
    for label, sets in (("fitted", data), ("held out", held)):
        for set_name, rows in sets.items():
            print(f"{label} {set_name}: {routing_figures(w, rows, upper, lower, args.band)}")
    if args.leave_one_out and len(data) > 1:
        for set_name, rows in data.items():
            rest = {n: r for n, r in data.items() if n != set_name}
            w_rest, _ = train(rest, args.band, args.max_wrong, args.per_chunk, args.ranked)
            print(f"answer chunk leads in {set_name}, fitted on the others: {leads(w_rest, rows):.3f}")
    if args.cv > 1:
        for set_name, acc in cross_validate(
            data, args.band, args.cv, args.max_wrong, args.per_chunk, args.ranked
        ).items():
            print(f"routing accuracy {set_name}, {args.cv}-fold cross-validated: {acc:.3f}")
    if args.table:
        print_anchor_table(w, data, args.band)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("datasets", nargs="+", type=Path, help="datasets to fit on")
    parser.add_argument("--report", nargs="*", type=Path, default=[], help="datasets scored, never fitted")
    parser.add_argument("--semantic", action="store_true", help="fit the lexical + semantic model")
    parser.add_argument("--band", type=float, default=0.2, help="logit width of the ambiguous band")
    parser.add_argument(
        "--max-wrong", type=float, default=1.0, help="confidently-wrong proxy allowed per fitted dataset"
    )
    parser.add_argument(
        "--rows", type=Path, default=None, help="keep each dataset's features here and reuse them (refits)"
    )
    parser.add_argument(
        "--per-chunk", action="store_true", help="per-chunk answer model, without the routing refit"
    )
    parser.add_argument(
        "--floor-on",
        default=None,
        metavar="NAME",
        help="a fitted dataset's name: choose the lower anchor on it (floor()) instead of upper - band",
    )
    parser.add_argument(
        "--ranked",
        type=float,
        default=0.0,
        metavar="WEIGHT",
        help="add a listwise term of this weight (ranked_fit): answer-holding chunks first",
    )
    parser.add_argument(
        "--lower-as-shipped",
        action="store_true",
        help="lower anchor: the highest keeping the answer chunk of as many answerable questions as the "
        "shipped model (crag/stages/grade/local.py SEMANTIC) on every fitted dataset",
    )
    parser.add_argument(
        "--leave-one-out",
        action="store_true",
        help="also fit on all fitted datasets but one and report how often the held one's answer chunk leads",
    )
    parser.add_argument("--table", action="store_true", help="print accuracy for a range of anchors")
    parser.add_argument(
        "--cv", type=int, default=0, metavar="K", help="also report K-fold cross-validated accuracy"
    )
    return parser


def lower_anchor(args: argparse.Namespace, data: dict[str, Rows], w: np.ndarray, upper: float) -> float:
    """upper - band, or as --floor-on or --lower-as-shipped choose it."""
    lower: float = upper - args.band
    if args.floor_on is not None:
        if args.floor_on not in data:
            raise SystemExit(f"--floor-on: {args.floor_on} is not one of the fitted datasets")
        rows = data[args.floor_on]
        inside = np.array([r[0] for r in rows])
        lower = floor(question_logits(w, rows), inside, best_holds_answer(w, rows), upper)
    if args.lower_as_shipped:
        lower = lower_as_shipped(w, data, args.semantic)
    return lower


def print_model(w: np.ndarray, upper: float, lower: float, semantic: bool) -> None:
    """A table to paste into crag/stages/grade/weights.toml (with a `fitted` note on how)."""
    name = "semantic" if semantic else "lexical"
    features = SEMANTIC_FEATURES if semantic else LEXICAL_FEATURES
    print(f"[{name}]\nbias = {w[-1]:.3f}\nupper = {upper:.2f}\nlower = {lower:.2f}\n\n[{name}.weights]")
    print("\n".join(f"{f} = {v:.3f}" for f, v in zip(features, w[:-1], strict=True)))


def routing_figures(w: np.ndarray, rows: Rows, upper: float, lower: float, band: float) -> str:
    """What the anchors make of a dataset's questions, in words."""
    z = question_logits(w, rows)
    inside = np.array([r[0] for r in rows])
    holds = best_holds_answer(w, rows)
    routed = float(((z >= upper) & inside).sum()) / max(1, int(inside.sum()))
    # What the lower anchor decides: answers that can quote the gold, and questions the
    # corpus cannot answer that are shown a passage anyway.
    kept = float(((z >= lower) & inside & holds).sum()) / max(1, int(inside.sum()))
    shown = float(((z >= lower) & ~inside).sum()) / max(1, int((~inside).sum()))
    return (
        f"routing accuracy {accuracy(z, inside, upper, band):.3f}, "
        f"confidently-wrong proxy {wrong_share(z, inside, holds, upper):.3f}, "
        f"answerable routed to documents {routed:.3f}, answer chunk kept {kept:.3f}, "
        f"unanswerable shown a passage {shown:.3f}, answer chunk leads {leads(w, rows):.3f}"
    )


def print_anchor_table(w: np.ndarray, data: dict[str, Rows], band: float) -> None:
    logits = {n: question_logits(w, rows) for n, rows in data.items()}
    inside_of = {n: np.array([r[0] for r in rows]) for n, rows in data.items()}
    for u in np.arange(-2.0, 4.0, 0.1):
        cells = "  ".join(f"{n} {accuracy(z, inside_of[n], u, band):.3f}" for n, z in logits.items())
        print(f"upper {u:6.2f}: {cells}")


if __name__ == "__main__":
    main()
