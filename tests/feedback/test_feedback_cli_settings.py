"""The feedback CLI reads its settings as the bot does: the environment first, then .env in the
folder it runs from, so it finds the store the bot writes to."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from feedback.sqlite_store import FeedbackStore
from tests.feedback.test_feedback_to_eval import fill
from tests.paths import ROOT


def cli(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CRAG_")}
    return subprocess.run(
        [sys.executable, "-m", "feedback", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, "PYTHONPATH": str(ROOT), **(env or {})},
    )


async def test_the_database_named_in_dotenv_is_the_one_read(tmp_path: Path) -> None:
    db = tmp_path / "ratings.sqlite3"
    store = FeedbackStore(db)
    await store.open()
    await fill(store)
    await store.close()
    (tmp_path / ".env").write_text(f"CRAG_FEEDBACK_DB={db}\n", "utf-8")
    done = cli(tmp_path, "stats", "--json")
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)
    assert sum(sum(by.values()) for by in counts["by_branch"].values()) > 0
    # The environment wins over .env, as for the bot.
    other = tmp_path / "elsewhere.sqlite3"
    moved = cli(tmp_path, "stats", env={"CRAG_FEEDBACK_DB": str(other)})
    assert moved.returncode == 2 and str(other) in moved.stderr


def test_a_bad_store_in_dotenv_is_named_without_a_traceback(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("CRAG_FEEDBACK_STORE=mongo\n", "utf-8")
    done = cli(tmp_path, "stats")
    assert done.returncode == 2
    assert "invalid settings: CRAG_FEEDBACK_STORE" in done.stderr and "Traceback" not in done.stderr
