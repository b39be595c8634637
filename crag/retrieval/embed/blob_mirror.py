"""A copy of the shared vector cache in an Azure Blob container (CRAG_VECTOR_CACHE_BLOB_CONTAINER), so
that a second replica or a redeploy pulls the vectors in seconds instead of embedding for hours.

The container holds the cache's model folders as blob "folders": `<model folder>/<prefix>vectors.npy`
and `<prefix>vectors.json`, the shards exactly as SharedCache writes them (store.py). Shards are
immutable and uniquely named, so mirroring is a matter of names:

- pull (once per process and folder, before a build first reads the cache): every shard of the
  container's model folder this folder has never seen is downloaded (both files to temporary names,
  then renamed vectors first, keys last, as local shards are written);
- push (after every shard SharedCache writes): every local shard the container does not have is
  uploaded, vectors first, keys last (a reader that lists the keys finds the vectors). A merged
  shard of local compaction stays local when all its sources went up (or came down).

What the container has is remembered in the folder (`.blob-<container>-<hash>.known`, one shard name a
line), so shards compacted away locally are not pulled again. Blob errors never fail a build: one
warning (what failed and the error's kind, never the connection string nor a URL, which may hold a
SAS token), then the local cache goes on alone and the mirror is retried after RETRY_AFTER seconds.
Short timeouts and few retries: an unreachable endpoint costs a few seconds, not minutes.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

from crag.config.engine_settings import StorageAccount
from crag.outbound.entra_tokens import sync_credential
from crag.retrieval.embed.store import KEYS_FILE, VECTORS_FILE

log = logging.getLogger(__name__)

# A dead endpoint costs (RETRIES + 1) tries of CONNECT_TIMEOUT (a refused connection: none), one that
# accepts and never answers as many READ_TIMEOUTs: about 17 s or 32 s, once per RETRY_AFTER.
CONNECT_TIMEOUT = 5.0  # seconds to open a connection
READ_TIMEOUT = 10.0  # seconds a response may pause (between bytes: not a whole download's)
RETRIES = 2  # after the first try, about 1 s apart
RETRY_AFTER = 300.0  # seconds the mirror rests after a failure (the local cache works meanwhile)
DOWNLOADS = 8  # shards downloaded at a time
_PREFIX = re.compile(r"^[A-Za-z0-9_-]+\.$")  # a shard's prefix as SharedCache names it (no "/", no "..")


class BlobMirror:
    """A SharedCache mirror (store.ShardMirror) in one Blob container; thread-safe, one per process
    and container (`blob_mirror`)."""

    def __init__(self, account: StorageAccount, container: str, **transport: Any) -> None:
        """transport: azure-core options such as connection_verify (a CA bundle)."""
        from azure.storage.blob import BlobServiceClient, LinearRetry

        # The SDK's default waits 15 s, then 18 s, then 24 s: a minute per call to a dead endpoint.
        retry = LinearRetry(backoff=1.0, retry_total=RETRIES, random_jitter_range=0.5)
        options: dict[str, Any] = {
            "connection_timeout": CONNECT_TIMEOUT,
            "read_timeout": READ_TIMEOUT,
            "retry_policy": retry,
            **transport,
        }
        if account.keyless:  # the account's shared keys are off in Azure: an Entra token
            self._service = BlobServiceClient(account.account_url, credential=sync_credential(), **options)
        else:
            self._service = BlobServiceClient.from_connection_string(account.connection_string, **options)
        self._container = self._service.get_container_client(container)
        self.container = container
        # The record's name: this container of this account (its host and name: never a key or a SAS).
        service = self._service
        where = f"{service.primary_hostname}|{service.account_name}|{container}".encode()
        self._record_name = f".blob-{container}-{hashlib.sha1(where).hexdigest()[:8]}.known"
        self._lock = threading.Lock()
        self._pulled: set[Path] = set()
        self._resting_until = 0.0

    # -- ShardMirror ------------------------------------------------------------------------------
    def pull(self, folder: Path) -> None:
        with self._lock:
            if folder in self._pulled or self._resting():
                return
            try:
                self._pull(folder)
            except Exception as exc:  # a local disk error: the build goes on without the copy
                self._failed(f"pulling {folder.name}/", exc)

    def push(self, folder: Path) -> None:
        with self._lock:
            if self._resting():
                return
            try:
                self._push(folder)
            except Exception as exc:
                self._failed(f"pushing {folder.name}/", exc)

    def compacted(self, folder: Path, merged: str, shards: Sequence[str]) -> None:
        with self._lock:
            if set(shards) <= self._known(folder):
                self._remember(folder, [merged])  # every row of it is up there already

    # -- the work, under the lock -----------------------------------------------------------------
    def _pull(self, folder: Path) -> None:
        started = time.perf_counter()
        known = self._known(folder)
        local = set(_local_shards(folder))
        try:
            remote = self._remote_shards(folder.name)
        except Exception as exc:
            if _missing_container(exc):
                self._pulled.add(folder)  # nothing up there yet: the first push creates it
            else:
                self._failed(f"listing {folder.name}/", exc)
            return
        self._remember(folder, sorted((remote & local) - known))
        todo = sorted(remote - known - local)
        if not todo:
            self._pulled.add(folder)
            return
        folder.mkdir(parents=True, exist_ok=True)
        errors: list[BaseException] = []

        def fetch(prefix: str) -> str | None:
            try:
                self._download(folder, prefix)
            except Exception as exc:
                errors.append(exc)
                return None
            return prefix

        with ThreadPoolExecutor(DOWNLOADS, thread_name_prefix="vector-cache-pull") as pool:
            got = [p for p in pool.map(fetch, todo) if p is not None]
        self._remember(folder, got)
        if errors:
            self._failed(f"pulling {len(errors)} of {len(todo)} shards of {folder.name}/", errors[0])
        else:
            self._pulled.add(folder)
        log.info(
            "vector cache: %d shards pulled from Blob container %s (%s/) in %.1fs",
            len(got),
            self.container,
            folder.name,
            time.perf_counter() - started,
        )

    def _push(self, folder: Path) -> None:
        known = self._known(folder)
        for prefix in _local_shards(folder):
            if prefix in known:
                continue
            try:
                self._upload(folder, prefix)
            except FileNotFoundError:
                continue  # compacted away meanwhile (by another process): its merged shard goes up
            except Exception as exc:
                self._failed(f"pushing shard {folder.name}/{prefix}", exc)
                return
            self._remember(folder, [prefix])
            known.add(prefix)

    # -- Blob ---------------------------------------------------------------------------------------
    def _remote_shards(self, model_folder: str) -> set[str]:
        start = f"{model_folder}/"
        out: set[str] = set()
        for blob in self._container.list_blobs(name_starts_with=start):
            name: str = blob.name
            prefix = name[len(start) :].removesuffix(KEYS_FILE)
            if name.endswith(KEYS_FILE) and _PREFIX.match(prefix):
                out.add(prefix)
        return out

    def _download(self, folder: Path, prefix: str) -> None:
        tag = f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        names = (f"{prefix}{VECTORS_FILE}", f"{prefix}{KEYS_FILE}")  # renamed in this order
        temps = [folder / f"{name}{tag}" for name in names]
        try:
            for name, temp in zip(names, temps, strict=True):
                with open(temp, "wb") as f:
                    self._container.download_blob(f"{folder.name}/{name}").readinto(f)
            for name, temp in zip(names, temps, strict=True):
                os.replace(temp, folder / name)
        finally:
            for temp in temps:
                temp.unlink(missing_ok=True)

    def _upload(self, folder: Path, prefix: str) -> None:
        # Both files opened first: a shard compacted away meanwhile uploads nothing (FileNotFoundError),
        # one compacted away while it goes up is still read whole (an open file outlives its name).
        names = (f"{prefix}{VECTORS_FILE}", f"{prefix}{KEYS_FILE}")
        with open(folder / names[0], "rb") as vectors, open(folder / names[1], "rb") as keys:
            for name, body in ((names[0], vectors), (names[1], keys)):  # vectors first, keys last
                self._upload_blob(f"{folder.name}/{name}", body)

    def _upload_blob(self, name: str, body: BinaryIO) -> None:
        """Upload, creating the container first when it does not exist yet."""
        size = os.fstat(body.fileno()).st_size
        try:
            self._container.upload_blob(name, body, length=size, overwrite=True)
        except Exception as exc:
            if not _missing_container(exc):
                raise
            from azure.core.exceptions import ResourceExistsError

            with contextlib.suppress(ResourceExistsError):  # another replica made it meanwhile
                self._container.create_container()
            body.seek(0)
            self._container.upload_blob(name, body, length=size, overwrite=True)

    # -- the record and the rest ------------------------------------------------------------------
    def _known(self, folder: Path) -> set[str]:
        try:
            return set((folder / self._record_name).read_text("utf-8").split())
        except OSError:
            return set()

    def _remember(self, folder: Path, prefixes: Iterable[str]) -> None:
        lines = "".join(f"{p}\n" for p in prefixes)
        if not lines:
            return
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with open(folder / self._record_name, "a", encoding="utf-8") as f:  # short appends: whole lines
                f.write(lines)
        except OSError as exc:  # not remembered: pulled or pushed again next time, no harm
            log.warning("vector cache %s: Blob record not written (%s)", folder, exc.__class__.__name__)

    def _resting(self) -> bool:
        return time.monotonic() < self._resting_until

    def _failed(self, what: str, exc: BaseException) -> None:
        self._resting_until = time.monotonic() + RETRY_AFTER
        log.warning(
            "vector cache: Blob container %s: %s failed (%s); the local cache goes on alone, the Blob"
            " copy is tried again in %.0f s",
            self.container,
            what,
            _kind(exc),
            RETRY_AFTER,
        )


def _local_shards(folder: Path) -> list[str]:
    if not folder.is_dir():
        return []
    return sorted(p.name[: -len(KEYS_FILE)] for p in folder.glob(f"*.{KEYS_FILE}"))


def _missing_container(exc: BaseException) -> bool:
    return getattr(exc, "error_code", None) == "ContainerNotFound"


def _kind(exc: BaseException) -> str:
    """What went wrong, without the message: an SDK's message may quote a URL with a SAS token."""
    status = getattr(exc, "status_code", None)
    code = getattr(exc, "error_code", None)
    return " ".join(str(part) for part in (exc.__class__.__name__, status, code) if part)


_mirrors: dict[tuple[str, str], BlobMirror] = {}
_mirrors_lock = threading.Lock()


def blob_mirror(account: StorageAccount, container: str) -> BlobMirror | None:
    """The process's mirror of that container (one per container: it remembers what it pulled), or
    None with a warning when it cannot be made (a malformed connection string)."""
    where = account.connection_string or account.account_url
    key = (hashlib.sha256(where.encode()).hexdigest(), container)
    with _mirrors_lock:
        mirror = _mirrors.get(key)
        if mirror is None:
            try:
                mirror = BlobMirror(account, container)
            except ImportError as exc:
                log.warning(
                    "vector cache: no Blob copy in container %s: azure-storage-blob does not import (%s)",
                    container,
                    _kind(exc),
                )
                return None
            except Exception as exc:
                log.warning(
                    "vector cache: no Blob copy in container %s: AZURE_STORAGE_CONNECTION_STRING or"
                    " AZURE_STORAGE_ACCOUNT_URL is not usable (%s)",
                    container,
                    _kind(exc),
                )
                return None
            _mirrors[key] = mirror
        return mirror
