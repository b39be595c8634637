"""Several processes serving one folder (app.py --workers N) build its index once: the first to take
the lock builds, the others load what it wrote."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from crag.ingest.local_target import load_or_build
from crag.retrieval.search.local_index import LocalIndex


def _open(args: tuple[str, str]) -> bool:
    docs, index = args
    _, report = load_or_build(Path(docs), Path(index))
    return report is not None  # True: this process built it


def test_concurrent_processes_build_the_index_once(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(30):
        text = f"# 規程 {i}\n\n出張の日当は{i}00円です。申請は翌月10日までに行う。\n"
        (docs / f"doc{i}.md").write_text(text, "utf-8")
    index = tmp_path / "index"
    context = multiprocessing.get_context("spawn")
    with context.Pool(3) as pool:
        built = pool.map(_open, [(str(docs), str(index))] * 3)
    assert sorted(built) == [False, False, True]
    assert LocalIndex.load(index).size == 30
    assert not index.with_name("index.building").exists()
