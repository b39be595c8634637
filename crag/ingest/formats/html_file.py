"""HTML pages → Markdown: headers, paragraphs, lists, tables and code blocks; page chrome dropped.

Beautiful Soup (with the stdlib "html.parser" backend) rather than html.parser alone: real pages have
unclosed <p> and <li>, stray end tags and odd encodings; html.parser only emits events, so we would
have to rebuild the tree and tag-closing rules ourselves, while Beautiful Soup gives that tree and
decodes bytes from the BOM / <meta charset> (UnicodeDammit). It is pure Python and long maintained;
the "html.parser" backend keeps the result the same wherever it runs (no optional lxml/html5lib).
"""

from __future__ import annotations

import re

from bs4 import BeautifulSoup, Comment, Declaration, Doctype, ProcessingInstruction, Tag
from bs4.dammit import UnicodeDammit
from bs4.element import NavigableString

from crag.ingest.formats.common import (
    Converted,
    FormatError,
    assemble,
    check_binary_text,
    heading,
    inline,
    paragraph,
    table,
)

# Never content: code, styling, navigation and embedded objects.
_DROP = ["script", "style", "noscript", "template", "nav", "svg", "iframe", "canvas", "object", "embed"]
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_BLOCKS = [
    *_HEADINGS,
    "p",
    "div",
    "section",
    "article",
    "main",
    "header",
    "footer",
    "aside",
    "blockquote",
    "ul",
    "ol",
    "li",
    "dl",
    "dt",
    "dd",
    "table",
    "pre",
    "hr",
    "figure",
    "figcaption",
    "address",
    "details",
    "summary",
    "form",
    "fieldset",
    "body",
    "html",
]
_BLOCK_SET = frozenset(_BLOCKS)
_BREAK = "\ue000"  # stands for <br> while whitespace is collapsed; a private-use character
_LINE_SPACES = re.compile(r"\s+")


def convert(data: bytes) -> Converted:
    check_binary_text(data)
    # Declared encodings (BOM, <meta charset>) win; undeclared pages are tried as UTF-8, then Shift_JIS.
    markup = UnicodeDammit(data, user_encodings=["utf-8", "cp932"], is_html=True).unicode_markup
    if markup is None:
        raise FormatError("the text encoding could not be recognized")
    soup = BeautifulSoup(markup, "html.parser")
    for node in soup.find_all(string=True):
        if isinstance(node, (Comment, Declaration, Doctype, ProcessingInstruction)):
            node.extract()
    for tag in soup.find_all(_DROP):
        tag.decompose()
    for tag in soup.find_all(None, {"role": "navigation"}):
        tag.decompose()
    for br in soup.find_all("br"):
        br.replace_with(_BREAK)

    title = ""
    if soup.title is not None:
        title = inline(soup.title.get_text())
        soup.title.decompose()
    if not title:
        first_h1 = soup.find("h1")
        title = inline(first_h1.get_text()) if first_h1 is not None else ""
    if soup.head is not None:
        soup.head.decompose()

    # A page with one <main> keeps only it: headers, footers and sidebars around it are site chrome.
    mains = soup.find_all("main")
    root = mains[0] if len(mains) == 1 else (soup.body or soup)
    blocks = _blocks(root)
    if not any(b.strip() for b in blocks):
        raise FormatError("no text found in the page")
    return Converted(title=title, text=assemble(title, blocks))


def _is_block(tag: Tag) -> bool:
    return tag.name in _BLOCK_SET or tag.find(_BLOCKS) is not None


def _text(tag: Tag) -> str:
    return _lines(tag.get_text())


def _lines(raw: str) -> str:
    """Inline text: whitespace collapsed as a browser does, one line per <br>."""
    lines = (_LINE_SPACES.sub(" ", part).strip() for part in raw.split(_BREAK))
    return "\n".join(line for line in lines if line)


def _blocks(container: Tag) -> list[str]:
    """Markdown blocks of a container, in order; inline runs between blocks become paragraphs."""
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        text = _lines("".join(run))
        if text:
            out.append(paragraph(text))
        run.clear()

    for child in container.children:
        if isinstance(child, NavigableString):
            run.append(str(child))
            continue
        if not isinstance(child, Tag):
            continue
        if not _is_block(child):
            run.append(child.get_text())
            continue
        flush()
        out.extend(_block(child))
    flush()
    return out


def _block(tag: Tag) -> list[str]:
    name = tag.name
    if name in _HEADINGS:
        text = inline(_text(tag))
        return [heading(_HEADINGS[name], text)] if text else []
    if name in ("ul", "ol"):
        lines = _list(tag, 0)
        return ["\n".join(lines)] if lines else []
    if name == "table":
        rendered = table(table_rows(tag))
        return [rendered] if rendered else []
    if name == "pre":
        code = tag.get_text().replace(_BREAK, "\n").strip("\n")
        # A fence longer than any backtick run inside keeps the code block closed where it should be.
        fence = "`" * max([3, *(len(m) + 1 for m in re.findall(r"`{3,}", code))])
        return [f"{fence}\n{code}\n{fence}"] if code.strip() else []
    if name == "hr":
        return []
    if name == "blockquote":
        inner = _blocks(tag)
        return ["\n".join("> " + line if line else ">" for line in "\n\n".join(inner).split("\n"))]
    if name in ("p", "dt", "dd", "figcaption", "summary", "address") and not tag.find(_BLOCKS):
        text = _text(tag)
        return [paragraph(text)] if text else []
    return _blocks(tag)


def _list(tag: Tag, level: int) -> list[str]:
    lines: list[str] = []
    ordered = tag.name == "ol"
    for number, item in enumerate(tag.find_all("li", recursive=False), start=1):
        marker = f"{number}." if ordered else "-"
        own: list[str] = []
        nested: list[str] = []
        for child in item.children:
            if isinstance(child, Tag) and child.name in ("ul", "ol"):
                nested.extend(_list(child, level + 1))
            elif isinstance(child, Tag) and _is_block(child):
                own.extend(f" {block} " for block in _block(child))
            elif isinstance(child, Tag):
                own.append(child.get_text())
            elif isinstance(child, NavigableString):
                own.append(str(child))
        text = inline("".join(own).replace(_BREAK, " "))
        if text:
            lines.append("  " * level + f"{marker} {text}")
        lines.extend(nested)
    return lines


def _flat(tag: Tag) -> str:
    """A cell's text on one line: a space where a block or line break starts, none between inline
    elements ("東京<b>都</b>" stays 東京都, which get_text(" ") would split)."""
    parts: list[str] = []
    for node in tag.descendants:
        if isinstance(node, NavigableString):
            parts.append(str(node))
        elif isinstance(node, Tag) and node.name in _BLOCK_SET:
            parts.append(" ")
    return inline("".join(parts).replace(_BREAK, " "))


def table_rows(tag: Tag) -> list[list[str]]:
    """Rows of this table only (not of tables nested in its cells); colspan keeps columns aligned."""
    rows: list[list[str]] = []
    trs: list[Tag] = []
    for child in tag.find_all(["tr", "thead", "tbody", "tfoot"], recursive=False):
        trs.extend([child] if child.name == "tr" else child.find_all("tr", recursive=False))
    for tr in trs:
        row: list[str] = []
        for td in tr.find_all(["td", "th"], recursive=False):
            row.append(_flat(td))
            span = str(td.get("colspan") or "1")
            row.extend([""] * (min(int(span), 50) - 1 if span.isdigit() else 0))
        rows.append(row)
    return rows
