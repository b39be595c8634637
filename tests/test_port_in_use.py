"""A port already taken gives one clear line and exit 1, not a traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from tests.paths import ROOT
from tests.servers.app_process import AppProcess


def test_a_port_in_use_is_said_plainly(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nText.\n", "utf-8")
    app = AppProcess(tmp_path, docs, CRAG_EMBEDDINGS="off")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", app.port))
        taken.listen()
        done = subprocess.run(
            [sys.executable, "app.py"], cwd=ROOT, env=app.env, capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 1, done.stderr[-800:]
    assert f"port {app.port} on 127.0.0.1 is already in use" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
