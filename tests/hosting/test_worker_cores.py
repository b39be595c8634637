"""Which core each worker keeps to, and the index-build helpers a pinned worker starts."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from hosting.workers import cores_to_pin


def test_workers_are_pinned_only_one_per_core() -> None:
    assert cores_to_pin(2, {0, 1}) == [0, 1]
    assert cores_to_pin(4, {3, 1, 2, 0}) == [0, 1, 2, 3]
    assert cores_to_pin(2, {0, 1, 2, 3}) is None  # fewer workers than cores: let them move
    assert cores_to_pin(3, {0, 1}) is None  # more workers than cores
    assert cores_to_pin(1, {0}) is None  # one process: nothing to spread


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_a_build_helper_started_by_a_pinned_worker_uses_every_core_again() -> None:
    cores = sorted(os.sched_getaffinity(0))
    env = {**os.environ, "CRAG_CPUS": ",".join(map(str, cores))}
    # Started as a pinned worker starts it: inheriting one core.
    helper = subprocess.Popen(
        [sys.executable, "-m", "crag.ingest.term_pool"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        preexec_fn=lambda: os.sched_setaffinity(0, {cores[0]}),
    )
    try:
        deadline = time.monotonic() + 30
        while os.sched_getaffinity(helper.pid) != set(cores) and time.monotonic() < deadline:
            assert helper.poll() is None
            time.sleep(0.05)
        assert os.sched_getaffinity(helper.pid) == set(cores)
    finally:
        helper.kill()
        helper.wait()
