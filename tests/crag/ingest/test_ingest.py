"""Loading files, header-based chunking, and the local index's build / load / rebuild decisions."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from crag.ingest.chunker import chunk_document
from crag.ingest.loaders import Document, DocumentError, discover, load
from crag.ingest.local_target import FolderSettings, build_local_index, load_or_build
from crag.text.sentences import sentence_ends


def _doc(text: str, markdown: bool = True) -> Document:
    return Document(file="guide.md", title="Guide", text=text, markdown=markdown)


def test_chunks_split_on_h1_to_h3_with_header_paths() -> None:
    text = (
        "# Guide\n\nIntro text.\n\n## Setup\n\nInstall it.\n\n### Windows\n\nRun setup.exe.\n\n"
        "#### Detail\n\nStill Windows.\n\n## Use\n\nClick."
    )
    chunks = chunk_document(_doc(text), 1200, "http://x/guide.md")
    assert [c.headers for c in chunks] == [
        ["Guide"],
        ["Guide", "Setup"],
        ["Guide", "Setup", "Windows"],
        ["Guide", "Use"],
    ]
    assert "#### Detail" in chunks[2].text and "Still Windows." in chunks[2].text  # H4 stays inside
    assert all(c.file == "guide.md" and c.title == "Guide" and c.url == "http://x/guide.md" for c in chunks)
    assert [c.ordinal for c in chunks] == [0, 1, 2, 3]
    assert len({c.id for c in chunks}) == 4


def test_headers_inside_code_fences_do_not_split() -> None:
    text = "# Guide\n\n## Shell\n\n```bash\n# not a header\necho hi\n```\n"
    chunks = chunk_document(_doc(text), 1200, "")
    assert len(chunks) == 1 and "# not a header" in chunks[0].text


def test_long_sections_split_at_sentence_ends_under_the_cap() -> None:
    sentence = "これは長い段落の一文です。"  # 13 characters
    text = "# 規程\n\n## 本文\n\n" + sentence * 100
    chunks = chunk_document(_doc(text), 200, "")
    assert len(chunks) > 5
    assert all(len(c.text) <= 200 for c in chunks)
    assert all(c.text.endswith("。") for c in chunks)
    assert "".join(c.text for c in chunks) == sentence * 100  # nothing lost
    assert all(c.headers == ["Guide", "本文"] or c.headers[-1] == "本文" for c in chunks)


def test_a_long_section_is_cut_at_the_last_sentence_end_in_reach() -> None:
    # Sentences of random lengths, some longer than the cap (hard cuts), in both languages.
    rng = random.Random(5)
    words = ["The claim", "is paid", "on the 25th", "経費は", "翌月10日まで", "に申請する"]
    body = "".join(
        " ".join(rng.choice(words) for _ in range(rng.randint(1, 40))) + rng.choice([". ", "。", "\n"])
        for _ in range(400)
    )
    cap = 150
    # What the chunker must do, written the slow, obvious way: each piece ends at the last sentence
    # end that keeps it under the cap, or at the cap when there is none.
    # A piece cut at a sentence end inside a line has the sentence before the cut as its lead.
    ends = sentence_ends(body)
    expected, start, lead = [], 0, ""
    while len(body) - start > cap:
        cut = max((e for e in ends if start < e <= start + cap), default=start + cap)
        expected.append((body[start:cut].strip(), lead))
        sentence_start = max((e for e in ends if start <= e < cut), default=start)
        inside_line = cut in ends and body[cut - 1] != "\n" and body[cut : cut + 1] != "\n"
        lead = body[sentence_start:cut].strip() if inside_line else ""
        start = cut
    expected.append((body[start:].strip(), lead))
    chunks = chunk_document(_doc("# Guide\n\n## Body\n\n" + body), cap, "")
    assert [(c.text, c.lead) for c in chunks] == [e for e in expected if e[0]]
    assert sum(bool(c.lead) for c in chunks) > 10  # the case is exercised


def test_a_chunk_cut_inside_a_paragraph_keeps_the_sentence_before_as_its_lead() -> None:
    text = (
        "# 出張\n\n## 日当\n\n"
        "日当は雑費を補う定額手当です。日帰り出張は¥2,500を支給します。宿泊を伴う出張は¥3,500です。\n"
        "海外出張は地域ごとに定めます。"
    )
    chunks = chunk_document(_doc(text), 20, "")  # one sentence per chunk
    assert [(c.text, c.lead) for c in chunks] == [
        ("日当は雑費を補う定額手当です。", ""),
        ("日帰り出張は¥2,500を支給します。", "日当は雑費を補う定額手当です。"),
        ("宿泊を伴う出張は¥3,500です。", "日帰り出張は¥2,500を支給します。"),
        ("海外出張は地域ごとに定めます。", ""),  # a line of its own: it goes on from nothing
    ]


def test_plain_text_uses_first_line_as_title(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("Travel rules\n\nBook trains early.\n", "utf-8")
    doc = load(tmp_path / "notes.txt", tmp_path)
    assert doc.title == "Travel rules" and not doc.markdown
    chunks = chunk_document(doc, 1200, "")
    assert chunks[0].headers == ["Travel rules"]


def test_loader_reads_shift_jis_and_rejects_broken_files(tmp_path: Path) -> None:
    (tmp_path / "sjis.txt").write_bytes("経費精算の手引き\n\n領収書を添付する。".encode("cp932"))
    assert load(tmp_path / "sjis.txt", tmp_path).title == "経費精算の手引き"
    (tmp_path / "empty.md").write_text("  \n", "utf-8")
    (tmp_path / "binary.md").write_bytes(b"\x89PNG\x00\x00\x01garbage")
    with pytest.raises(DocumentError, match="empty"):
        load(tmp_path / "empty.md", tmp_path)
    with pytest.raises(DocumentError, match="binary"):
        load(tmp_path / "binary.md", tmp_path)


def test_discover_skips_hidden_and_unsupported(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\ntext", "utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("B\n\ntext", "utf-8")
    (tmp_path / ".hidden.md").write_text("# H", "utf-8")
    (tmp_path / "archive.zip").write_bytes(b"PK\x03\x04")
    assert [p.relative_to(tmp_path).as_posix() for p in discover(tmp_path)] == ["a.md", "sub/b.txt"]


def test_index_is_built_loaded_and_rebuilt_on_change(tmp_path: Path) -> None:
    docs, index_dir = tmp_path / "docs", tmp_path / "index"
    docs.mkdir()
    (docs / "a.md").write_text("# Alpha\n\nThe alpha server runs in Osaka.", "utf-8")
    (docs / "broken.md").write_bytes(b"\x00\x01\x02")
    index, report = load_or_build(docs, index_dir)
    assert report is not None and report.documents == 1 and len(report.skipped) == 1
    assert "broken.md" in report.skipped[0]

    again, report = load_or_build(docs, index_dir)
    assert report is None  # unchanged files: loaded, not rebuilt
    assert [c.text for c in again.chunks] == [c.text for c in index.chunks]
    assert again.search_terms(again.terms("alpha server"), 5)[0].chunk.file == "a.md"

    (docs / "a.md").write_text("# Alpha\n\nThe alpha server moved to Sapporo.", "utf-8")
    changed, report = load_or_build(docs, index_dir)
    assert report is not None  # content hash changed: rebuilt
    assert "Sapporo" in changed.chunks[0].text

    (docs / "b.md").write_text("# Beta\n\nBeta is the staging cluster.", "utf-8")
    added, report = load_or_build(docs, index_dir)
    assert report is not None and added.documents == 2
    hits = added.search_terms(added.terms("staging cluster"), 5)
    assert hits and hits[0].chunk.file == "b.md"


def test_search_ignores_unknown_terms_and_returns_no_zero_hits(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nalpha beta", "utf-8")
    (docs / "b.md").write_text("# B\n\ngamma delta", "utf-8")
    index, _ = load_or_build(docs, tmp_path / "index")
    assert index.search_terms(["zzzz"], 5) == []
    hits = index.search_terms(index.terms("gamma"), 5)
    assert [h.chunk.file for h in hits] == ["b.md"]


def test_corrupt_index_is_rebuilt(tmp_path: Path) -> None:
    docs, index_dir = tmp_path / "docs", tmp_path / "index"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nalpha", "utf-8")
    load_or_build(docs, index_dir)
    (index_dir / "chunks.jsonl").write_text("{not json", "utf-8")
    index, report = load_or_build(docs, index_dir)
    assert report is not None and index.size == 1


def test_rebuild_reuses_unchanged_files(tmp_path: Path) -> None:
    docs, index_dir = tmp_path / "docs", tmp_path / "index"
    docs.mkdir()
    for i in range(5):
        (docs / f"doc{i}.md").write_text(f"# Doc {i}\n\n## Part\n\nFact number {i} is kept here.", "utf-8")
    _, first = build_local_index(docs, index_dir)
    assert first.reused == 0 and first.documents == 5
    (docs / "doc2.md").write_text("# Doc 2\n\n## Part\n\nThe replaced fact lives in Nagoya.", "utf-8")
    (docs / "doc4.md").unlink()
    index, second = load_or_build(docs, index_dir)
    assert second is not None
    assert second.reused == 3  # doc0, doc1, doc3 taken as they were
    assert second.bytes == len((docs / "doc2.md").read_text("utf-8").encode())  # only doc2 was read
    assert second.documents == 4 and {c.file for c in index.chunks} == {
        "doc0.md",
        "doc1.md",
        "doc2.md",
        "doc3.md",
    }
    assert index.search_terms(index.terms("Nagoya"), 3)[0].chunk.file == "doc2.md"
    assert index.search_terms(index.terms("number 3"), 3)[0].chunk.file == "doc3.md"
    # Changing an index-shaping setting rebuilds everything.
    _, third = build_local_index(docs, index_dir, FolderSettings(max_chars=300))
    assert third.reused == 0


def test_token_cap_splits_dense_japanese_text() -> None:
    from crag.ingest.token_count import count_tokens

    text = "# 規程\n\n## 本文\n\n" + "経費精算の締め切りは翌月十日です。" * 60  # ~1,000 characters
    chunks = chunk_document(_doc(text), 1200, "", max_tokens=200)
    assert len(chunks) > 1
    assert all(count_tokens(c.text) <= 200 for c in chunks)
    assert "".join(c.text for c in chunks) == "経費精算の締め切りは翌月十日です。" * 60
    # English of the same length stays in one chunk: the cap counts tokens, not characters.
    english = "# Rules\n\n## Body\n\n" + "Claims are due on the tenth. " * 35
    assert len(chunk_document(_doc(english), 1200, "", max_tokens=400)) == 1
