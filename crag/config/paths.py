"""Where the engine keeps its files unless told otherwise.

From a source checkout (this file under <checkout>/crag/config/) that is the checkout: data/ and
sample_docs/ beside the code, as ./run.sh uses them. Installed as a package (`pip install .`), it is
the current folder, and the sample documents are the copy installed with the package under
<prefix>/share/crag-teams-bot/sample_docs.
"""

from __future__ import annotations

import sys
from pathlib import Path

_SOURCE_ROOT = Path(__file__).resolve().parents[2]


def _project_root() -> Path:
    if (_SOURCE_ROOT / "pyproject.toml").is_file() and (_SOURCE_ROOT / "crag").is_dir():
        return _SOURCE_ROOT
    return Path.cwd()


def _sample_docs(root: Path) -> Path:
    beside = root / "sample_docs"
    installed = Path(sys.prefix) / "share" / "crag-teams-bot" / "sample_docs"
    return installed if not beside.is_dir() and installed.is_dir() else beside


PROJECT_ROOT = _project_root()
DATA_DIR = PROJECT_ROOT / "data"
SAMPLE_DOCS = _sample_docs(PROJECT_ROOT)
