"""Vectors on disk, keyed by a hash of (model name, text): computed once per content, never again.

Two places hold them:
- the index folder (`vectors.npy` + `vectors.json`): exactly the vectors the index's chunks and
  sentences need, carried over when the index is rebuilt, so changing one file re-embeds only it;
- a cache folder shared by every index (`CRAG_VECTOR_CACHE`, default `data/vectors/`): shards
  appended by any build, so fresh indexes over the same documents (tests, evaluations) embed nothing.
  Optionally mirrored to a remote copy (`ShardMirror`: a Blob container, blob_mirror.py) that other
  machines pull from, so a new replica or a redeploy embeds nothing either.
Files are written to a temporary name and renamed: readers never see half a file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

log = logging.getLogger(__name__)

VECTORS_FILE = "vectors.npy"
KEYS_FILE = "vectors.json"
_MAX_SHARDS = 24  # a cache folder with more shards than this is merged into one


def text_key(model: str, text: str) -> str:
    return hashlib.sha1(f"{model}\x00{text}".encode()).hexdigest()[:24]


def read_vectors(folder: Path, model: str) -> dict[str, np.ndarray]:
    """key -> float16 row, from a folder written by write_vectors for this model ({} otherwise)."""
    return _read_shard(folder, "", model)


def write_vectors(folder: Path, model: str, vectors: Mapping[str, np.ndarray], prefix: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    keys = list(vectors)
    dim = len(next(iter(vectors.values()))) if keys else 0
    matrix = np.zeros((len(keys), dim), np.float16)
    for i, k in enumerate(keys):
        matrix[i] = vectors[k]
    tag = f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    npy, meta = folder / f"{prefix}{VECTORS_FILE}", folder / f"{prefix}{KEYS_FILE}"
    with open(npy.with_name(npy.name + tag), "wb") as f:
        np.save(f, matrix)
    body = json.dumps({"model": model, "dim": dim, "keys": keys})
    meta.with_name(meta.name + tag).write_text(body, "utf-8")
    # Vectors first, keys last: a reader takes the keys as the sign that both are there.
    os.replace(npy.with_name(npy.name + tag), npy)
    os.replace(meta.with_name(meta.name + tag), meta)


class ShardMirror(Protocol):
    """A remote copy of a SharedCache's model folder (shards named as in the folder). Its methods
    never raise: a remote that fails costs speed, not correctness."""

    def pull(self, folder: Path) -> None:
        """Write into the folder the remote's shards it has not seen yet (the first call per folder
        and process; later calls return at once)."""

    def push(self, folder: Path) -> None:
        """Upload the folder's shards the remote does not have yet (vectors first, keys last)."""

    def compacted(self, folder: Path, merged: str, shards: Sequence[str]) -> None:
        """`merged` (a prefix) was written from `shards`, deleted since: it need not go up when they
        all did."""


class SharedCache:
    """Content-hash cache shared across index folders: one subfolder per model, one shard per write."""

    def __init__(self, root: Path, model: str, mirror: ShardMirror | None = None) -> None:
        self.folder = root / re.sub(r"[^A-Za-z0-9._-]+", "_", model)
        self.model = model
        self.mirror = mirror

    def load(self, wanted: Iterable[str]) -> dict[str, np.ndarray]:
        wanted_set = set(wanted)
        if self.mirror is not None and wanted_set:
            self.mirror.pull(self.folder)  # once per process: the shards other machines wrote
            self.mirror.push(self.folder)  # and, the first time, the ones written before the mirror
            try:
                self._compact_if_many()
            except OSError as exc:
                log.warning("vector cache %s not compacted (%s)", self.folder, exc.__class__.__name__)
        found: dict[str, np.ndarray] = {}
        for prefix in self._shards():
            if not wanted_set:
                break
            rows = _read_shard(self.folder, prefix, self.model)
            for key in wanted_set & rows.keys():
                found[key] = np.array(rows[key])
            wanted_set -= found.keys()
        return found

    def add(self, vectors: Mapping[str, np.ndarray]) -> None:
        if not vectors:
            return
        try:
            prefix = f"{int(time.time() * 1000):013d}-{uuid.uuid4().hex[:8]}."
            write_vectors(self.folder, self.model, vectors, prefix)
            if self.mirror is not None:
                self.mirror.push(self.folder)
            self._compact_if_many()
        except OSError as exc:  # a read-only or full disk costs speed, not correctness
            log.warning("vector cache %s not written (%s)", self.folder, exc.__class__.__name__)

    def _shards(self) -> list[str]:
        if not self.folder.is_dir():
            return []
        return sorted(p.name[: -len(KEYS_FILE)] for p in self.folder.glob(f"*.{KEYS_FILE}"))

    def _compact_if_many(self) -> None:
        if len(self._shards()) > _MAX_SHARDS:
            self._compact()

    def _compact(self) -> None:
        shards = self._shards()
        merged: dict[str, np.ndarray] = {}
        for prefix in shards:
            merged.update({k: np.array(v) for k, v in _read_shard(self.folder, prefix, self.model).items()})
        merged_prefix = f"{int(time.time() * 1000):013d}-merged."
        write_vectors(self.folder, self.model, merged, merged_prefix)
        for prefix in shards:
            for name in (KEYS_FILE, VECTORS_FILE):
                (self.folder / f"{prefix}{name}").unlink(missing_ok=True)
        if self.mirror is not None:
            self.mirror.compacted(self.folder, merged_prefix, shards)


def _read_shard(folder: Path, prefix: str, model: str) -> dict[str, np.ndarray]:
    try:
        meta = json.loads((folder / f"{prefix}{KEYS_FILE}").read_text("utf-8"))
        if meta.get("model") != model:
            return {}
        keys: list[str] = meta["keys"]
        matrix = np.load(folder / f"{prefix}{VECTORS_FILE}", mmap_mode="r")
    except (OSError, ValueError, KeyError, TypeError):
        return {}  # removed by a concurrent compaction, or torn: its vectors are simply computed again
    if matrix.ndim != 2 or matrix.shape[0] != len(keys):
        return {}
    return {k: matrix[i] for i, k in enumerate(keys)}
