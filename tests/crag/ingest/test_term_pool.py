"""The build's term extraction in helper processes: same terms, same order, and a build that still
completes when a helper cannot start or dies."""

from __future__ import annotations

import logging
import pickle
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from crag.ingest import term_pool
from crag.ingest.local_target import build_local_index
from crag.ingest.term_pool import TermPool
from crag.text.tokenize import term_extractor

_WORDS = "有給休暇 繰越し 申請 期限 経費 精算 出張 旅費 remote work allowance laptop return deadline".split()


def _texts(n: int) -> list[str]:
    rng = random.Random(3)
    return [f"{i}番目: " + " ".join(rng.choice(_WORDS) for _ in range(12)) + "。" for i in range(n)]


def _spawned(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    calls: list[list[str]] = []
    real = subprocess.Popen

    def popen(args: list[str], **kw: object) -> subprocess.Popen[bytes]:
        calls.append(list(args))
        return real(args, **kw)  # type: ignore[call-overload, no-any-return]

    monkeypatch.setattr(subprocess, "Popen", popen)
    return calls


def _watch_asks(monkeypatch: pytest.MonkeyPatch, fail_first: bool = False) -> threading.Event:
    """Set once a helper has been asked for a batch (which fails, with fail_first, as a killed
    helper's reply does)."""
    asked = threading.Event()
    real_ask = term_pool._ask

    def ask(stdin, stdout, batch):  # type: ignore[no-untyped-def]
        first = not asked.is_set()
        try:
            if first and fail_first:
                raise pickle.UnpicklingError("pickle data was truncated")
            return real_ask(stdin, stdout, batch)
        finally:
            asked.set()

    monkeypatch.setattr(term_pool, "_ask", ask)
    return asked


def test_helpers_give_the_same_terms_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    spawned = _spawned(monkeypatch)
    asked = _watch_asks(monkeypatch)
    texts = _texts(700)  # 11 batches
    with TermPool(expected_bytes=10**9, cores=3) as pool:
        for t in texts:
            pool.add(t)
        assert asked.wait(60)  # a helper has answered: the rest is shared with this process
        got = pool.results()
    assert len(spawned) == 2  # two helpers beside this process
    extractor = term_extractor()
    assert got == [extractor.terms(t) for t in texts]


def test_a_small_build_starts_no_helper(monkeypatch: pytest.MonkeyPatch) -> None:
    spawned = _spawned(monkeypatch)
    with TermPool(expected_bytes=1000, cores=4) as pool:
        pool.add("経費精算の期限")
        assert pool.results() == [term_extractor().terms("経費精算の期限")]
    assert spawned == []


def test_a_helper_that_cannot_start_leaves_the_work_here(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    texts = _texts(200)
    with caplog.at_level(logging.WARNING), TermPool(expected_bytes=10**9, cores=2) as pool:
        for t in texts:
            pool.add(t)
        got = pool.results()
    assert got == [term_extractor().terms(t) for t in texts]
    assert "could not start" in caplog.text


def test_a_helper_dying_mid_build_loses_no_chunk(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    asked = _watch_asks(monkeypatch, fail_first=True)
    texts = _texts(640)
    with caplog.at_level(logging.WARNING), TermPool(expected_bytes=10**9, cores=2) as pool:
        for t in texts:
            pool.add(t)
        assert asked.wait(60)
        got = pool.results()
    assert got == [term_extractor().terms(t) for t in texts]
    assert "redone in this process" in caplog.text


def test_a_large_folder_builds_with_helpers_like_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i, t in enumerate(_texts(300)):
        (docs / f"doc{i}.md").write_text(f"# 文書{i}\n\n## 節\n\n{t}\n", "utf-8")
    monkeypatch.setattr(term_pool, "HELPERS_MIN_BYTES", 0)
    spawned = _spawned(monkeypatch)
    with_helpers, _ = build_local_index(docs, tmp_path / "a")
    assert spawned
    monkeypatch.setattr(term_pool, "HELPERS_MIN_BYTES", 10**12)
    alone, _ = build_local_index(docs, tmp_path / "b")
    assert [c.id for c in with_helpers.chunks] == [c.id for c in alone.chunks]
    assert (tmp_path / "a" / "tokens.jsonl").read_text() == (tmp_path / "b" / "tokens.jsonl").read_text()


def test_a_stuck_helper_is_stopped_and_its_batch_done_here(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A helper that never answers (here: one that only sleeps).
    monkeypatch.setattr(term_pool, "_HELPER_ARGS", ("-c", "import time; time.sleep(600)"))
    monkeypatch.setattr(term_pool, "BATCH_SECONDS", 0.5)
    asked = _watch_asks(monkeypatch)
    texts = _texts(300)
    with caplog.at_level(logging.WARNING), TermPool(expected_bytes=10**9, cores=2) as pool:
        for t in texts:
            pool.add(t)
        assert asked.wait(60)  # the helper was given a batch (and was stopped)
        got = pool.results()
    assert got == [term_extractor().terms(t) for t in texts]
    assert "without an answer" in caplog.text
