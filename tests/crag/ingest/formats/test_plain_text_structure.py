"""Plain text files: underlined headings and space-aligned tables are read as Markdown structure."""

from __future__ import annotations

from pathlib import Path

from crag.ingest.chunker import chunk_document
from crag.ingest.formats.plain_text import structured
from crag.ingest.loaders import load
from crag.text.sentences import split_sentences

RETENTION = """PERSONAL DATA GUIDE
===================

Owner: Privacy Office  Legal


5. Retention
------------

  Data                                   Retention period
  Applicants who were not hired          1 year after the selection result
  CCTV footage at the plants             30 days

After the retention period, data is deleted.
"""


def test_aligned_table_rows_become_header_value_sentences(tmp_path: Path) -> None:
    (tmp_path / "guide.txt").write_text(RETENTION, encoding="utf-8")
    doc = load(tmp_path / "guide.txt", tmp_path)
    assert doc.markdown and doc.title == "PERSONAL DATA GUIDE"
    chunks = chunk_document(doc, 1200, "")
    retention = next(c for c in chunks if "30 days" in c.text)
    assert retention.headers == ["PERSONAL DATA GUIDE", "5. Retention"]
    # One sentence ties the row's data to its period (it was one run of words with every other row).
    assert "Data: CCTV footage at the plants; Retention period: 30 days" in split_sentences(retention.text)


def test_japanese_table_with_three_columns() -> None:
    text = (
        "2.1 付与日数\n\n"
        "  事由                                  日数    取得できる期間\n"
        "  本人の結婚                            5日     挙式日から6か月以内\n"
        "  配偶者の出産                          3日     出産日から8週間以内\n"
    )
    out, found = structured(text)
    assert found
    assert "| 配偶者の出産 | 3日 | 出産日から8週間以内 |" in out.split("\n")


def test_prose_and_two_aligned_lines_stay_as_they_are() -> None:
    text = "施行：2023年10月1日\u3000改定：2024年4月1日\n本文です。  二つの空白。\n\nName  Value\nA  1\n"
    assert structured(text) == (text, False)
