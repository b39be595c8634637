"""Run the real bot (`python app.py`) in a subprocess on 127.0.0.1, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.paths import ROOT
from tests.servers.harness import free_port


class AppProcess:
    def __init__(self, tmp: Path, docs_dir: Path, *args: str, **env: str) -> None:
        self.args = list(args)  # command-line options of app.py (e.g. "--workers", "2")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.feedback_db = tmp / "feedback.sqlite3"
        self.log_path = tmp / "app.log"
        self.env = {
            **os.environ,
            "PORT": str(self.port),
            "CRAG_DOCS_DIR": str(docs_dir),
            "CRAG_INDEX_DIR": str(tmp / "index"),
            "CRAG_FEEDBACK_DB": str(self.feedback_db),
            "CRAG_STATE_DB": str(tmp / "state.sqlite3"),
            "PYTHONUNBUFFERED": "1",
            **env,
        }
        for key in ("MicrosoftAppId", "MicrosoftAppPassword", "HOST"):
            if key not in env:
                self.env.pop(key, None)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 90.0) -> None:
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "app.py", *self.args],
            cwd=ROOT,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"app exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(self.url + "/api/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"app did not become healthy in {timeout}s:\n{self.log()}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if hasattr(self, "_log"):
            self._log.close()

    def log(self) -> str:
        return self.log_path.read_text("utf-8", errors="replace") if self.log_path.exists() else ""

    def health(self) -> dict[str, Any]:
        import json

        with urllib.request.urlopen(self.url + "/api/health", timeout=5) as r:
            return json.loads(r.read())  # type: ignore[no-any-return]
