"""The local side of `python -m crag.cli.ingest DIR`: build the local index from a folder and write it.

Rebuilt when a file's content hash, the file set or an index-shaping setting changes (only the
changed files are read again), loaded as it is otherwise. crag.retrieval.search.local_index reads what this
writes.

Scanned pages are read by the OCR engine passed in (crag/ingest/ocr): its name is part of the
fingerprint, and the manifest records what OCR did for each file with scanned pages ("scans"), so that
a new engine reads those files again, and a file whose OCR failed (a service error) is retried.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import bm25s

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

from crag.access.files import AccessFile, access_file_digest, read_access_file
from crag.core.models import Chunk
from crag.ingest.chunker import chunk_document, document_url
from crag.ingest.loaders import Document, DocumentError, discover, load
from crag.ingest.ocr.ocr_engine import OcrEngine
from crag.ingest.ocr.scans import OcrContext, ScanReport
from crag.ingest.term_pool import TermPool
from crag.retrieval.embed.store import KEYS_FILE, VECTORS_FILE
from crag.retrieval.search.bm25_build import build_bm25
from crag.retrieval.search.local_index import (
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
INDEX_FORMAT = 15
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
    ocr_engine: str = "none"  # OcrEngine.name
    ocr_pages: int = 0  # scanned pages (and images) read by OCR in this build
    ocr_skipped_pages: int = 0  # scanned pages found in this build and not read
    ocr_seconds: float = 0.0  # time spent reading files with scanned pages
    # Files indexed without some of their scanned pages, and why.
    ocr_notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class FolderSettings:
    """What shapes a folder's index besides its files: the chunks' size (characters, tokens), the base
    of the citation links, the OCR engine for scanned pages, and the access file."""

    max_chars: int = 1200
    base_url: str = ""
    max_tokens: int = 0
    ocr: OcrEngine | None = None
    access: AccessSource | None = None


def load_or_build(
    docs_dir: Path,
    index_dir: Path,
    max_chars: int = 1200,
    base_url: str = "",
    progress: Progress | None = None,
    max_tokens: int = 0,
    fingerprint: dict[str, object] | None = None,
    ocr: OcrEngine | None = None,
    access: AccessSource | None = None,
) -> tuple[LocalIndex, BuildReport | None]:
    """Load the index if it matches the documents (their fingerprint, when the caller has it),
    otherwise (re)build it (report None: loaded). `access` is where the folder's access file is
    (crag/access/files.py): its rules give each chunk its readers, and its content is part of the
    fingerprint. Raises AccessFileError when that file cannot be used."""
    # Hashing every file is the costly part of the check: do it once, for the check and the build.
    if fingerprint is None and docs_dir.is_dir():
        fingerprint = _fingerprint(docs_dir, max_chars, base_url, max_tokens, _ocr_name(ocr), access)
    # Several processes may serve one folder (`app.py --workers N`), and each re-indexes it when a
    # file changes: the first to take the lock builds, the others wait and then load what it wrote.
    with build_lock(index_dir):
        if fingerprint is not None and _is_current(index_dir, fingerprint):
            try:
                return LocalIndex.load(index_dir), None
            except (OSError, ValueError, KeyError) as exc:
                log.warning("local index unreadable (%s); rebuilding", exc.__class__.__name__)
        settings = FolderSettings(max_chars, base_url, max_tokens, ocr, access)
        return build_local_index(docs_dir, index_dir, settings, progress, fingerprint)


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
    ocr_name: str = "none",
    access: AccessSource | None = None,
) -> dict[str, object] | None:
    """The folder's fingerprint when it no longer matches the index of `current_version` (the one
    serving: pass the fingerprint on to load_or_build); None when it does. Reads only the files'
    hashes. Compared with the index in memory, not the one stored: another process serving the same
    folder may have stored the new index already."""
    if not docs_dir.is_dir():
        raise FileNotFoundError(f"documents folder not found: {docs_dir}")
    fingerprint = _fingerprint(docs_dir, max_chars, base_url, max_tokens, ocr_name, access)
    return None if index_version(fingerprint) == current_version else fingerprint


def build_local_index(
    docs_dir: Path,
    index_dir: Path,
    settings: FolderSettings | None = None,
    progress: Progress | None = None,
    fingerprint: dict[str, object] | None = None,
) -> tuple[LocalIndex, BuildReport]:
    """Build the index; files whose content hash is unchanged since the last build are reused
    as they were (chunks and terms), so re-ingesting a large folder only reads what changed.
    Scanned pages are read with `settings.ocr` (None: they are skipped and counted). Each chunk gets
    its file's readers from the access file (reused ones too: a changed access file re-applies to
    every file without reading any of them again)."""
    started = time.perf_counter()
    if not docs_dir.is_dir():
        raise FileNotFoundError(f"documents folder not found: {docs_dir}")
    settings = settings or FolderSettings()
    # Read first: a broken access file stops the build before any work, and never lets it go on
    # without the rules.
    rules = settings.access.read() if settings.access is not None else AccessFile()
    ocr_name = _ocr_name(settings.ocr)
    fingerprint = _built_for(docs_dir, settings, ocr_name, rules, fingerprint)
    hashes: dict[str, str] = fingerprint["files"]  # type: ignore[assignment]
    previous, old_scans = _previous_build(index_dir, fingerprint, ocr_name)
    folder = _FolderRead(
        docs_dir, rules, settings, progress, hashes, previous, old_scans, _OcrTally(ocr_name)
    )
    links: list[str] = []  # symbolic links met (never followed): reported, not counted as files
    files = discover(docs_dir, links)
    # Files read again (new or changed): enough text to be worth tokenizing in helper processes,
    # which start now and work while the files are read.
    expected = sum(_size(p) for p in files if folder.changed(p.relative_to(docs_dir).as_posix()))
    with TermPool(expected) as pool:
        parts = _Parts([], [], [], pool=pool)
        folder.read_all(files, parts)
        warn_about(rules, [f.relative_to(docs_dir).as_posix() for f in files])
        documents = len(files) - len(folder.skipped)
        scans = folder.ocr.scans
        index, report = _finish(
            index_dir, fingerprint, parts, documents, links + folder.skipped, started, {"scans": scans}
        )
    index.scans = scans
    index.ocr_engine = ocr_name
    return index, folder.ocr.report(report)


def _built_for(
    docs_dir: Path,
    settings: FolderSettings,
    ocr_name: str,
    rules: AccessFile,
    fingerprint: dict[str, object] | None,
) -> dict[str, object]:
    """The fingerprint the build records: the caller's (else the folder's), with the access rules as
    this build applies them."""
    fingerprint = dict(
        fingerprint
        or _fingerprint(
            docs_dir, settings.max_chars, settings.base_url, settings.max_tokens, ocr_name, settings.access
        )
    )
    if rules.digest:
        # The rules applied, whatever the file held when it was hashed: the next check compares
        # the file with what this index really applied.
        fingerprint["access"] = rules.digest
    return fingerprint


# file -> (content hash, [(chunk, terms)]) of the last build (_previous_build)
_Previous = dict[str, tuple[str, list[tuple[Chunk, list[str]]]]]


@dataclass
class _OcrTally:
    """What OCR did in a folder's build: per file (its ScanReport, for the manifest), and in all."""

    engine: str  # OcrEngine.name
    scans: dict[str, dict[str, object]] = field(default_factory=dict)
    pages: int = 0
    skipped_pages: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def add(self, rel: str, scan: ScanReport, seconds: float, indexed: bool) -> None:
        self.scans[rel] = asdict(scan)
        self.pages += scan.read
        self.skipped_pages += scan.skipped
        self.seconds += seconds
        if indexed and scan.skipped:
            note = f"{rel}: {scan.skipped} of {scan.scanned} scanned page(s) not read ({scan.reason})"
            log.warning("indexed without some pages: %s", note)
            self.notes.append(note)

    def report(self, report: BuildReport) -> BuildReport:
        return dataclasses.replace(
            report,
            ocr_engine=self.engine,
            ocr_pages=self.pages,
            ocr_skipped_pages=self.skipped_pages,
            ocr_seconds=self.seconds,
            ocr_notes=self.notes,
        )


@dataclass
class _FolderRead:
    """A folder build's pass over its files: each reused from the last build when unchanged, else
    read again (files that cannot be read are `skipped`, with the reason)."""

    docs_dir: Path
    rules: AccessFile
    settings: FolderSettings
    progress: Progress | None
    hashes: dict[str, str]
    previous: _Previous
    old_scans: dict[str, dict[str, object]]
    ocr: _OcrTally
    skipped: list[str] = field(default_factory=list)

    def changed(self, rel: str) -> bool:
        return _changed(rel, self.previous, self.hashes)

    def read_all(self, files: list[Path], parts: _Parts) -> None:
        for i, path in enumerate(files):
            self.read_one(path, i, len(files), parts)
        if self.progress:
            self.progress("", len(files), len(files))

    def read_one(self, path: Path, i: int, total: int, parts: _Parts) -> None:
        rel = path.relative_to(self.docs_dir).as_posix()
        if self.progress:
            self.progress(path.name, i, total)
        allowed = self.rules.allowed_for(rel)
        if not self.changed(rel):
            if rel in self.old_scans:
                self.ocr.scans[rel] = self.old_scans[rel]
            parts.reuse(
                (chunk if chunk.allowed == allowed else chunk.model_copy(update={"allowed": allowed}), terms)
                for chunk, terms in self.previous[rel][1]
            )
            return
        doc = self.load(path, rel, i, total)
        if doc is None:
            return
        doc = replace(doc, allowed=allowed)
        url = document_url(self.settings.base_url, doc.file)
        parts.add_document(doc, self.settings.max_chars, url, self.settings.max_tokens)

    def load(self, path: Path, rel: str, i: int, total: int) -> Document | None:
        """The file's document, None when it cannot be read; what OCR did with it is tallied."""
        read_started = time.perf_counter()
        scan: ScanReport | None
        try:
            doc = load(
                path,
                self.docs_dir,
                OcrContext(self.settings.ocr, _page_progress(self.progress, path.name, i, total)),
            )
            scan = doc.scan
        except DocumentError as exc:
            log.warning("skipping document: %s", exc)
            self.skipped.append(str(exc))
            scan = exc.scan
            doc = None
        if scan is not None:
            self.ocr.add(rel, scan, time.perf_counter() - read_started, doc is not None)
        return doc


@dataclass
class _Parts:
    """The chunks of a build in the making: those reused with their terms, and the fresh ones."""

    chunks: list[Chunk]
    tokens: list[list[str]]
    fresh: list[int]  # positions of chunks read in this build (their terms still to compute)
    bytes: int = 0
    reused: int = 0
    # The fresh chunks' terms in the making, in order (a folder's build adds them as it reads).
    pool: TermPool | None = None

    def reuse(self, pairs: Iterable[tuple[Chunk, list[str]]]) -> None:
        """A file taken from the previous build: its chunks with their terms."""
        self.reused += 1
        for chunk, terms in pairs:
            self.chunks.append(chunk)
            self.tokens.append(terms)

    def add_document(self, doc: Document, max_chars: int, url: str, max_tokens: int) -> None:
        """A document read in this build: its chunks, their terms still to compute."""
        self.bytes += len(doc.text.encode())
        for chunk in chunk_document(doc, max_chars, url, max_tokens):
            self.chunks.append(chunk)
            self.tokens.append([])
            self.fresh.append(len(self.chunks) - 1)
            if self.pool is not None:
                # Title and section headers are searchable: questions name the subject the body
                # leaves implicit.
                self.pool.add(chunk.framed_text)


def _finish(
    index_dir: Path,
    fingerprint: dict[str, object],
    parts: _Parts,
    documents: int,
    skipped: list[str],
    started: float,
    extra: dict[str, object] | None = None,
) -> tuple[LocalIndex, BuildReport]:
    """Tokenize the fresh chunks, index everything with BM25 and write the index folder."""
    extractor = term_extractor()
    chunks, tokens = parts.chunks, parts.tokens
    if parts.pool is None:
        with TermPool(parts.bytes) as pool:
            for i in parts.fresh:
                pool.add(chunks[i].framed_text)
            fresh_terms = pool.results()
    else:
        fresh_terms = parts.pool.results()
    for i, terms in zip(parts.fresh, fresh_terms, strict=True):
        tokens[i] = terms
    bm25, df = build_bm25(tokens) if chunks else (bm25s.BM25(), {})
    _save(index_dir, fingerprint, chunks, tokens, df, bm25, documents, skipped, extra)
    index = LocalIndex(chunks, bm25, df, documents, extractor)
    index.skipped = skipped
    index.version = index_version(fingerprint)
    index.hashes = dict(fingerprint["files"])  # type: ignore[call-overload]
    index.dir = index_dir
    report = BuildReport(
        documents=documents,
        chunks=len(chunks),
        skipped=skipped,
        seconds=time.perf_counter() - started,
        bytes=parts.bytes,
        reused=parts.reused,
    )
    return index, report


def _changed(rel: str, previous: Mapping[str, tuple[str, object]], hashes: Mapping[str, str]) -> bool:
    old = previous.get(rel)
    return old is None or old[0] != hashes.get(rel)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _ocr_name(ocr: OcrEngine | None) -> str:
    return ocr.name if ocr is not None else "none"


def _page_progress(
    progress: Progress | None, name: str, done: int, total: int
) -> Callable[[int, int], None] | None:
    """Progress within a file being read by OCR (seconds a page): the bar names the page it is on."""
    if progress is None:
        return None
    return lambda page, pages: progress(f"OCR {page}/{pages} {name}", done, total)


def build_from_documents(
    index_dir: Path,
    fingerprint: dict[str, object],
    documents: Mapping[str, Document],
    urls: Mapping[str, str],
    skipped: list[str],
    max_chars: int = 1200,
    max_tokens: int = 0,
    extra: dict[str, object] | None = None,
    progress: Progress | None = None,
) -> tuple[LocalIndex, BuildReport]:
    """Build the index of a source that is not a folder (a SharePoint library) the way a folder's is
    built: each file of fingerprint["files"] (file -> key) is taken from the previous build when its
    key is unchanged, else chunked from `documents` (what the source read again; `urls` are their
    citation links). A file in neither could not be read: `skipped` says why. `extra` is stored in
    the manifest beside the fingerprint (the source's sync state), in the same atomic swap."""
    started = time.perf_counter()
    keys: dict[str, str] = fingerprint["files"]  # type: ignore[assignment]
    with build_lock(index_dir):
        previous, _ = _previous_build(index_dir, fingerprint, _ocr_name(None))
        parts = _Parts([], [], [])
        indexed = 0
        for i, rel in enumerate(sorted(keys)):
            if progress:
                progress(rel.rsplit("/", 1)[-1], i, len(keys))
            old = previous.get(rel)
            if old is not None and old[0] == keys[rel]:
                indexed += 1
                parts.reuse(old[1])
                continue
            doc = documents.get(rel)
            if doc is None:
                continue
            indexed += 1
            parts.add_document(doc, max_chars, urls.get(rel, ""), max_tokens)
        if progress:
            progress("", len(keys), len(keys))
        return _finish(index_dir, fingerprint, parts, indexed, list(skipped), started, extra)


def indexed_keys(index_dir: Path, fingerprint: dict[str, object]) -> dict[str, str]:
    """file -> key of the files whose chunks the index in index_dir holds, when it was built with
    the same index-shaping settings as `fingerprint` (else none: everything is read again)."""
    previous, _ = _previous_build(index_dir, fingerprint, _ocr_name(None))
    return {rel: key for rel, (key, _) in previous.items()}


def update_manifest(index_dir: Path, **extra: object) -> None:
    """Replace entries of the stored manifest beside the fingerprint (a source's sync state) without
    rebuilding: written to a temporary file, then renamed over the manifest."""
    with build_lock(index_dir):
        meta = read_manifest(index_dir)
        meta.update(extra)
        tmp = index_dir / (MANIFEST_FILE + ".tmp")
        tmp.write_text(json.dumps(meta, ensure_ascii=False, indent=1), "utf-8")
        tmp.replace(index_dir / MANIFEST_FILE)


def _save(
    index_dir: Path,
    fingerprint: dict[str, object],
    chunks: list[Chunk],
    tokens: list[list[str]],
    doc_freq: dict[str, int],
    bm25: bm25s.BM25,
    documents: int,
    skipped: list[str],
    extra: dict[str, object] | None = None,
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
    meta.update(extra or {})  # a source's sync state, what OCR did per file ("scans")
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
    docs_dir: Path,
    max_chars: int,
    base_url: str,
    max_tokens: int,
    ocr_name: str = "none",
    access: AccessSource | None = None,
) -> dict[str, object]:
    files = discover(docs_dir) if docs_dir.is_dir() else []
    hashes = {p.relative_to(docs_dir).as_posix(): _file_hash(p) for p in files}
    fingerprint: dict[str, object] = {
        "format": INDEX_FORMAT,
        "max_chars": max_chars,
        "max_tokens": max_tokens,
        "base_url": base_url,
        "ocr": ocr_name,
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
    """The stored index matches the documents, and no file in it waits for OCR to be tried again."""
    try:
        meta = read_manifest(index_dir)
    except (OSError, ValueError):
        return False
    scans = meta.get("scans") or {}
    retry = any(isinstance(s, dict) and s.get("retry") for s in scans.values())
    return bool(meta.get("fingerprint") == fingerprint) and not retry


def _previous_build(
    index_dir: Path, fingerprint: dict[str, object], ocr_name: str
) -> tuple[dict[str, tuple[str, list[tuple[Chunk, list[str]]]]], dict[str, dict[str, object]]]:
    """file -> (content hash, [(chunk, terms)]) of the last build, when its settings match, and its
    scans. A file with scanned pages is left out (to be read again) when another OCR engine read
    it, or when its OCR failed in a way that may pass."""
    try:
        meta = read_manifest(index_dir)
        old = meta["fingerprint"]
        if any(old.get(k) != fingerprint[k] for k in ("format", "max_chars", "max_tokens", "base_url")):
            return {}, {}
        with (index_dir / CHUNKS_FILE).open(encoding="utf-8") as f:
            chunks = [Chunk.model_validate_json(line) for line in f if line.strip()]
        with (index_dir / TOKENS_FILE).open(encoding="utf-8") as f:
            tokens = [json.loads(line) for line in f if line.strip()]
        scans = {
            rel: scan
            for rel, scan in dict(meta.get("scans") or {}).items()
            if isinstance(scan, dict) and scan.get("engine") == ocr_name and not scan.get("retry")
        }
        stale = {rel for rel in dict(meta.get("scans") or {}) if rel not in scans}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}, {}
    if len(chunks) != len(tokens):
        return {}, {}
    out: dict[str, tuple[str, list[tuple[Chunk, list[str]]]]] = {}
    for chunk, terms in zip(chunks, tokens, strict=True):
        file_hash = old["files"].get(chunk.file)
        if file_hash is not None and chunk.file not in stale:
            out.setdefault(chunk.file, (file_hash, []))[1].append((chunk, terms))
    return out, scans
