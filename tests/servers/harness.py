"""What the real-server helpers of tests/servers share: a free loopback port, and skip-or-fail.

A test that needs a server the machine lacks is skipped with the reason, unless
CRAG_REQUIRE_SERVICES=1 (the CI sets it): then it fails, so a missing server is never mistaken for
a passing suite.
"""

from __future__ import annotations

import os
import socket

import pytest


def unavailable(reason: str) -> None:
    """Skip the test because a server is missing, or fail it when the servers are required."""
    if os.environ.get("CRAG_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason} (CRAG_REQUIRE_SERVICES=1: the test services must be installed)")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
