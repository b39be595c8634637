"""python -m crag.feedback …: the same commands as python -m feedback (feedback/__main__.py)."""

from __future__ import annotations

from feedback.__main__ import main

if __name__ == "__main__":
    raise SystemExit(main(prog="python -m crag.feedback"))
