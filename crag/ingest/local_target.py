"""The local side of `python -m crag.ingest DIR`: build the local index from a folder and write it.

Rebuilt when a file's content hash, the file set or an index-shaping setting changes (only the
changed files are read again), loaded as it is otherwise. crag.search.local_index reads what this
writes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import bm25s

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

from crag.access_file import AccessFile, access_file_digest, read_access_file
from crag.embed.store import KEYS_FILE, VECTORS_FILE
from crag.ingest.chunker import chunk_document, document_url
from crag.ingest.loaders import DocumentError, discover, load
from crag.models import Chunk
from crag.search.local_index import (
    BM25_DIR,
    CHUNKS_FILE,
    DOC_FREQ_FILE,
    MANIFEST_FILE,
    LocalIndex,
    index_version,
    read_manifest,
)
from crag.text.tokenize import term_extractor

log = logging.getLogger(__name__)

# Bump when tokenization or chunking changes so that old indexes are rebuilt, not misread.
INDEX_FORMAT = 8
# Each chunk's terms, kept so that the next build reuses an unchanged file without tokenizing it.
TOKENS_FILE = "tokens.jsonl"

Progress = Callable[[str, int, int], None]  # (file name, files done, files in all)


@dataclass(frozen=True)
class BuildReport:
    documents: int
    chunks: int
    skipped: list[str]  # human-readable reasons, one per broken file
    seconds: float
    bytes: int  # text read and indexed in this build (reused files excluded)
    reused: int = 0  # files taken unchanged from the previous build


def load_or_build(
    docs_dir: Path,
    index_dir: Path,
    max_chars: int = 1200,
    base_url: str = "",
    progress: Progress | None = None,
    max_tokens: int = 0,
    fingerprint: dict[str, object] | None = None,
    access: AccessSource | None = None,
) -> tuple[LocalIndex, BuildReport | None]:
    """Load the index if it matches the documents (their fingerprint, when the caller has it),
    otherwise (re)build it (report None: loaded). `access` is where the folder's access file is
    (crag/access_file.py): its rules give each chunk its readers, and its content is part of the
    fingerprint. Raises AccessFileError when that file cannot be used."""
    # Hashing every file is the costly part of the check: do it once, for the check and the build.
    if fingerprint is None and docs_dir.is_dir():
        fingerprint = _fingerprint(docs_dir, max_chars, base_url, max_tokens, access)
    # Several processes may serve one folder (`app.py --workers N`), and each re-indexes it when a
    # file changes: the first to take the lock builds, the others wait and then load what it wrote.
    with build_lock(index_dir):
        if fingerprint is not None and _is_current(index_dir, fingerprint):
            try:
                return LocalIndex.load(index_dir), None
            except (OSError, ValueError, KeyError) as exc:
                log.warning("local index unreadable (%s); rebuilding", exc.__class__.__name__)
        return build_local_index(
            docs_dir, index_dir, max_chars, base_url, progress, max_tokens, fingerprint, access
        )


@contextlib.contextmanager
def build_lock(index_dir: Path) -> Iterator[None]:
    """An exclusive lock on `<index_dir>.lock` across processes (POSIX flock; released by the kernel
    when a holder dies). Where flock does not exist (Windows) builds are not serialized."""
    if fcntl is None:
        yield
        return
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(index_dir.with_name(index_dir.name + ".lock"), "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def stale_fingerprint(
    docs_dir: Path,
    current_version: str,
    max_chars: int = 1200,
    base_url: str = "",
    max_tokens: int = 0,
    access: AccessSource | None = None,
) -> dict[str, object] | None:
    """The folder's fingerprint when it no longer matches the index of `current_version` (the one
    serving: pass the fingerprint on to load_or_build); None when it does. Reads only the files'
    hashes. Compared with the index in memory, not the one stored: another process serving the same
    folder may have stored the new index already."""
    if not docs_dir.is_dir():
        raise FileNotFoundError(f"documents folder not found: {docs_dir}")
    fingerprint = _fingerprint(docs_dir, max_chars, base_url, max_tokens, access)
    return None if index_version(fingerprint) == current_version else fingerprint


def build_local_index(
    docs_dir: Path,
    index_dir: Path,
    max_chars: int = 1200,
    base_url: str = "",
    progress: Progress | None = None,
    max_tokens: int = 0,
    fingerprint: dict[str, object] | None = None,
    access: AccessSource | None = None,
) -> tuple[LocalIndex, BuildReport]:
    """Build the index; files whose content hash is unchanged since the last build are reused
    as they were (chunks and terms), so re-ingesting a large folder only reads what changed. Each
    chunk gets its file's readers from the access file (reused ones too: a changed access file
    re-applies to every file without reading any of them again)."""
    started = time.perf_counter()
    if not docs_dir.is_dir():
        raise FileNotFoundError(f"documents folder not found: {docs_dir}")
    # Read first: a broken access file stops the build before any work, and never lets it go on
    # without the rules.
    rules = access.read() if access is not None else AccessFile()
    extractor = term_extractor()
    fingerprint = dict(fingerprint or _fingerprint(docs_dir, max_chars, base_url, max_tokens, access))
    if rules.digest:
        # The rules applied, whatever the file held when it was hashed: the next check compares
        # the file with what this index really applied.
        fingerprint["access"] = rules.digest
    hashes: dict[str, str] = fingerprint["files"]  # type: ignore[assignment]
    previous = _previous_build(index_dir, fingerprint)
    chunks: list[Chunk] = []
    tokens: list[list[str]] = []
    skipped: list[str] = []
    total_bytes = reused = 0
    fresh: list[int] = []  # positions of chunks read in this build (their terms still to compute)
    links: list[str] = []  # symbolic links met (never followed): reported, not counted as files
    files = discover(docs_dir, links)
    for i, path in enumerate(files):
        rel = path.relative_to(docs_dir).as_posix()
        if progress:
            progress(path.name, i, len(files))
        allowed = rules.allowed_for(rel)
        old = previous.get(rel)
        if old is not None and old[0] == hashes.get(rel):
            reused += 1
            for chunk, terms in old[1]:
                if chunk.allowed != allowed:
                    chunk = chunk.model_copy(update={"allowed": allowed})
                chunks.append(chunk)
                tokens.append(terms)
            continue
        try:
            doc = replace(load(path, docs_dir), allowed=allowed)
        except DocumentError as exc:
            log.warning("skipping document: %s", exc)
            skipped.append(str(exc))
            continue
        total_bytes += len(doc.text.encode())
        for chunk in chunk_document(doc, max_chars, document_url(base_url, doc.file), max_tokens):
            chunks.append(chunk)
            tokens.append([])
            fresh.append(len(chunks) - 1)
    if progress:
        progress("", len(files), len(files))
    warn_about(rules, [f.relative_to(docs_dir).as_posix() for f in files])
    # Sudachi releases the GIL while it tokenizes: threads use every core for the bulk of a build.
    workers = min(4, os.cpu_count() or 1)
    with ThreadPoolExecutor(workers) as pool:
        # Title and section headers are searchable: questions name the subject the body leaves implicit.
        texts = [chunks[i].framed_text for i in fresh]
        for i, terms in zip(fresh, pool.map(extractor.terms, texts, chunksize=64), strict=True):
            tokens[i] = terms
    df: Counter[str] = Counter()
    for toks in tokens:
        df.update(set(toks))
    bm25 = bm25s.BM25()
    if chunks:
        bm25.index(tokens, show_progress=False)
    documents = len(files) - len(skipped)
    skipped = links + skipped
    _save(index_dir, fingerprint, chunks, tokens, dict(df), bm25, documents, skipped)
    index = LocalIndex(chunks, bm25, dict(df), documents, extractor)
    index.skipped = skipped
    index.version = index_version(fingerprint)
    index.hashes = dict(hashes)
    index.dir = index_dir
    report = BuildReport(
        documents=documents,
        chunks=len(chunks),
        skipped=skipped,
        seconds=time.perf_counter() - started,
        bytes=total_bytes,
        reused=reused,
    )
    return index, report


def _save(
    index_dir: Path,
    fingerprint: dict[str, object],
    chunks: list[Chunk],
    tokens: list[list[str]],
    doc_freq: dict[str, int],
    bm25: bm25s.BM25,
    documents: int,
    skipped: list[str],
) -> None:
    # Write to a sibling folder, then swap: a crash mid-build never leaves a half index behind.
    tmp = index_dir.with_name(index_dir.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with (tmp / CHUNKS_FILE).open("w", encoding="utf-8") as f:
        for c in chunks:
            f.write(c.model_dump_json() + "\n")
    with (tmp / TOKENS_FILE).open("w", encoding="utf-8") as f:
        for terms in tokens:
            f.write(json.dumps(terms, ensure_ascii=False) + "\n")
    (tmp / DOC_FREQ_FILE).write_text(json.dumps(doc_freq, ensure_ascii=False), "utf-8")
    if chunks:
        bm25.save(str(tmp / BM25_DIR), show_progress=False)
    meta = {"fingerprint": fingerprint, "documents": documents, "chunks": len(chunks), "skipped": skipped}
    (tmp / MANIFEST_FILE).write_text(json.dumps(meta, ensure_ascii=False, indent=1), "utf-8")
    # Vectors are keyed by content: the old index's serve the new one for every unchanged chunk.
    for name in (VECTORS_FILE, KEYS_FILE):
        if (index_dir / name).is_file():
            shutil.copyfile(index_dir / name, tmp / name)
    old = index_dir.with_name(index_dir.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if index_dir.exists():
        index_dir.rename(old)
    tmp.rename(index_dir)
    shutil.rmtree(old, ignore_errors=True)


# The "hash" of a file that cannot be read: the build then skips it and names it, like a broken file.
UNREADABLE = "unreadable"


def _file_hash(path: Path) -> str | None:
    """The content hash; None when the file vanished since the folder was listed (a copy or a
    delete in progress: the watcher sees the next change and indexes again)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None
    except OSError:
        return UNREADABLE


def _fingerprint(
    docs_dir: Path, max_chars: int, base_url: str, max_tokens: int, access: AccessSource | None = None
) -> dict[str, object]:
    files = discover(docs_dir) if docs_dir.is_dir() else []
    hashes = {p.relative_to(docs_dir).as_posix(): _file_hash(p) for p in files}
    fingerprint: dict[str, object] = {
        "format": INDEX_FORMAT,
        "max_chars": max_chars,
        "max_tokens": max_tokens,
        "base_url": base_url,
        "files": {rel: digest for rel, digest in hashes.items() if digest is not None},
    }
    # Only with an access file: a folder without one keeps the fingerprint (and index) it had.
    digest = access_file_digest(access.path) if access is not None else None
    if digest is not None:
        fingerprint["access"] = digest
    return fingerprint


@dataclass(frozen=True)
class AccessSource:
    """Where a folder's access file is; `required`: it was configured (CRAG_ACCESS_FILE) and must
    exist, rather than the folder's optional default."""

    path: Path
    required: bool = False

    def read(self) -> AccessFile:
        return read_access_file(self.path, self.required)


def warn_about(rules: AccessFile, files: list[str]) -> None:
    """Log what in the access file is most likely a mistake (it does not stop the build)."""
    for warning in rules.warnings:
        log.warning("%s: %s", rules.path, warning)
    for rule in rules.unmatched_rules(files):
        log.warning("%s: rule %d (%s) matches no document", rules.path, rule.number, ", ".join(rule.patterns))


def _is_current(index_dir: Path, fingerprint: dict[str, object]) -> bool:
    try:
        return bool(read_manifest(index_dir).get("fingerprint") == fingerprint)
    except (OSError, ValueError):
        return False


def _previous_build(
    index_dir: Path, fingerprint: dict[str, object]
) -> dict[str, tuple[str, list[tuple[Chunk, list[str]]]]]:
    """file -> (content hash, [(chunk, terms)]) of the last build, when its settings match."""
    try:
        meta = read_manifest(index_dir)
        old = meta["fingerprint"]
        if any(old.get(k) != fingerprint[k] for k in ("format", "max_chars", "max_tokens", "base_url")):
            return {}
        with (index_dir / CHUNKS_FILE).open(encoding="utf-8") as f:
            chunks = [Chunk.model_validate_json(line) for line in f if line.strip()]
        with (index_dir / TOKENS_FILE).open(encoding="utf-8") as f:
            tokens = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    if len(chunks) != len(tokens):
        return {}
    out: dict[str, tuple[str, list[tuple[Chunk, list[str]]]]] = {}
    for chunk, terms in zip(chunks, tokens, strict=True):
        file_hash = old["files"].get(chunk.file)
        if file_hash is not None:
            out.setdefault(chunk.file, (file_hash, []))[1].append((chunk, terms))
    return out
