"""The indexer never follows a symbolic link: not to a file outside the documents folder, not into
a linked directory, not even to a file inside the folder. Each link is named in the skipped list,
and the same filter (`is_indexable`) decides what the /docs/ route may serve."""

from __future__ import annotations

from pathlib import Path

import pytest

from crag.config.engine_settings import CragSettings
from crag.ingest.azure_target import read_folder
from crag.ingest.loaders import DocumentError, discover, is_indexable, load
from crag.ingest.local_target import build_local_index
from crag.retrieval.search.local_index import LocalIndex

SECRET = "root:x:0:0:planted-secret-line"


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    """docs/ with one real document and links of every kind; outside/ holds what must never leak."""
    outside = tmp_path / "outside"
    (outside / "private").mkdir(parents=True)
    (outside / "passwd.txt").write_text(SECRET + "\n", "utf-8")
    (outside / "private" / "notes.md").write_text(f"# Notes\n\n{SECRET}\n", "utf-8")
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "leave.md").write_text("# Leave\n\nPaid leave carries over up to 20 days.\n", "utf-8")
    (docs / "passwd.txt").symlink_to(outside / "passwd.txt")  # a file link leaving the folder
    (docs / "private").symlink_to(outside / "private", target_is_directory=True)  # a directory link
    (docs / "sub" / "again.md").symlink_to(docs / "leave.md")  # even a link that stays inside
    (docs / "dangling.md").symlink_to(tmp_path / "nowhere.md")
    return docs, outside


def test_discover_skips_every_symlink_and_names_it(tmp_path: Path) -> None:
    docs, _ = _tree(tmp_path)
    skipped: list[str] = []
    files = discover(docs, skipped)
    assert [p.relative_to(docs).as_posix() for p in files] == ["leave.md"]
    named = sorted(reason.split(":", 1)[0] for reason in skipped)
    assert named == ["dangling.md", "passwd.txt", "private", "sub/again.md"]
    assert all("symbolic link" in reason for reason in skipped)


def test_local_index_holds_nothing_reached_through_a_link(tmp_path: Path) -> None:
    docs, _ = _tree(tmp_path)
    index, report = build_local_index(docs, tmp_path / "index")
    assert report.documents == 1 and {c.file for c in index.chunks} == {"leave.md"}
    assert all(SECRET not in c.text for c in index.chunks)
    assert sum("symbolic link" in reason for reason in report.skipped) == 4
    # The health endpoint reads the skipped list of a loaded index too.
    assert sum("symbolic link" in r for r in LocalIndex.load(tmp_path / "index").skipped) == 4


def test_azure_ingestion_reads_the_same_files(tmp_path: Path) -> None:
    docs, _ = _tree(tmp_path)
    chunks, hashes, skipped = read_folder(docs, CragSettings(), "")
    assert set(hashes) == {"leave.md"} and all(SECRET not in c.text for c in chunks)
    assert sum("symbolic link" in reason for reason in skipped) == 4


def test_is_indexable_is_the_filter_the_docs_route_can_reuse(tmp_path: Path) -> None:
    docs, outside = _tree(tmp_path)
    (docs / ".hidden").mkdir()
    (docs / ".hidden" / "h.md").write_text("# H\n", "utf-8")
    (docs / ".dot.md").write_text("# D\n", "utf-8")
    (docs / "~$lock.docx").write_bytes(b"lock")
    (docs / "image.gif").write_bytes(b"GIF89a")
    assert is_indexable(docs / "leave.md", docs)
    for bad in (
        docs / "passwd.txt",  # link to a file outside
        docs / "private" / "notes.md",  # a real file, but reached through a linked directory
        docs / "sub" / "again.md",  # link inside the folder
        docs / "dangling.md",
        docs / ".hidden" / "h.md",
        docs / ".dot.md",
        docs / "~$lock.docx",
        docs / "image.gif",  # not a supported format
        docs / "sub",  # a directory
        docs / "missing.md",
        docs / ".." / "outside" / "passwd.txt",  # lexical escape
        docs / "sub" / ".." / "leave.md",  # any '..' is refused, even one that stays inside
        outside / "passwd.txt",  # not under docs at all
        docs,
    ):
        assert not is_indexable(bad, docs), bad


def test_a_linked_documents_root_is_still_served(tmp_path: Path) -> None:
    """CRAG_DOCS_DIR itself may be a link (a deployment's choice); only links below it are refused."""
    docs, _ = _tree(tmp_path)
    root_link = tmp_path / "docs-link"
    root_link.symlink_to(docs, target_is_directory=True)
    assert [p.name for p in discover(root_link)] == ["leave.md"]
    assert is_indexable(root_link / "leave.md", root_link)


def test_load_refuses_a_link_even_when_asked_directly(tmp_path: Path) -> None:
    docs, _ = _tree(tmp_path)
    with pytest.raises(DocumentError, match="symbolic link"):
        load(docs / "passwd.txt", docs)


def test_ingest_command_names_the_links_it_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from crag.cli.ingest import main

    docs, _ = _tree(tmp_path)
    assert main([str(docs), "--index-dir", str(tmp_path / "index")]) == 0
    out = capsys.readouterr().out
    assert "indexed 1 documents" in out and "skipped 4 file(s)" in out
    assert "passwd.txt: a symbolic link" in out and SECRET not in out
