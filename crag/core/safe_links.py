"""What the bot may emit as a link or as markup: the one URL policy, used by every card and message.

Documents, web results and the model's own text can carry `javascript:` or `data:` URLs, Markdown
links and images, link reference definitions (which would turn the answer's `[1]` markers into
links) and raw HTML. Adaptive Card TextBlocks render no HTML, but Web Chat (and so the Emulator)
renders card and message Markdown with raw HTML allowed and only then sanitizes it, allowing
`data:` among its link schemes; Teams renders Markdown links. So:

- a URL is emitted only when it is absolute http(s) with a host, or mailto: (`safe_url`);
- in Markdown text, a link or image whose destination fails that test keeps its text and loses
  its link, autolinks become plain text, reference definitions are unmade, and HTML tags are
  removed (`<script>` and `<style>` with their content) (`safe_markdown`).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

ALLOWED_SCHEMES = ("http", "https", "mailto")

# Characters that would end or break a Markdown link destination, percent-encoded instead.
_ENCODE = {" ": "%20", "(": "%28", ")": "%29", "<": "%3C", ">": "%3E", '"': "%22", "`": "%60", "\\": "%5C"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def safe_url(url: str) -> str:
    """`url` when it is an absolute http(s) URL with a host or a mailto: address, else "".

    The scheme must be spelled out at the very start: no entities, escapes or spaces that a
    browser or Markdown parser would later decode into `javascript:`.
    """
    url = url.strip()
    if not url or _CONTROL.search(url):
        return ""
    lower = url.lower()
    if lower.startswith(("http://", "https://")):
        try:
            host = urlsplit(url).hostname
        except ValueError:  # a malformed IPv6 host, for one
            return ""
        if not host:
            return ""
    elif not (lower.startswith("mailto:") and len(url) > len("mailto:")):
        return ""
    return "".join(_ENCODE.get(ch, ch) for ch in url)


def link_text(text: str) -> str:
    """Text to place inside `[...]`: one line, no tags, no brackets that would end it early."""
    text = " ".join(_strip_html(text).split())
    return text.replace("[", "(").replace("]", ")")


def markdown_link(text: str, url: str) -> str:
    """`[text](url)` when the URL is allowed, else the text alone."""
    text = link_text(text)
    url = safe_url(url)
    return f"[{text}]({url})" if url else text


def safe_markdown(text: str) -> str:
    """Markdown for a TextBlock or a message: allowed links kept, every other link neutralised
    (its text kept), HTML removed. Safe on partial text too (each streamed update)."""
    text = _strip_html(text)
    text = _REFERENCE_DEFINITION.sub(_unmake_definition, text)
    for _ in range(5):  # links inside link text: each pass unwraps one level
        text, count = _INLINE_LINK.subn(_rebuild_link, text)
        if not count:
            break
    # Whatever still looks like `](destination` (nesting the pattern could not parse, say) is
    # kept only with an allowed destination; otherwise a space makes it plain text.
    return _LEFTOVER_LINK.sub(
        lambda m: m.group(0) if _allowed_start(m.group(1)) else "] (" + m.group(1), text
    )


# -- HTML -----------------------------------------------------------------------------------------
_RAW_TEXT_ELEMENT = re.compile(r"<(script|style|textarea|title|iframe)\b[^>]*>.*?</\1\s*>", re.I | re.S)
_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.S)
_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>|<[!?][^<>]*>")
# A `<` that could still open a tag (left by a tag cut short, e.g. in a streamed update).
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")


def _strip_html(text: str) -> str:
    text = _RAW_TEXT_ELEMENT.sub("", text)
    text = _COMMENT.sub("", text)
    text = _AUTOLINK.sub(lambda m: m.group(1), text)  # before tags: <https://x> is not a tag
    text = _TAG.sub("", text)
    return _TAG_START.sub("< ", text)  # "< b" is text to every parser: a tag name follows < directly


# -- Markdown links -------------------------------------------------------------------------------
# <scheme:...> and <user@host> autolinks: their text is kept, bare (plain http(s) URLs are still
# linked by the renderers' own linkify, other schemes are not).
_AUTOLINK = re.compile(
    r"<([A-Za-z][A-Za-z0-9+.\-]{1,31}:[^\s<>]*|[A-Za-z0-9.!#$%&'*+/=?^_`{|}~\-]+@[A-Za-z0-9.\-]+)>"
)
# [label]: destination "title" at the start of a line (up to three spaces of indentation).
_REFERENCE_DEFINITION = re.compile(r"^( {0,3})\[((?:[^\[\]\\\n]|\\.)+)\]:[ \t]*(\S*)[^\n]*$", re.M)
_INLINE_LINK = re.compile(
    r"(!?)\[((?:[^\[\]\\]|\\.)*)\]"  # ![alt] or [text]
    r"\(\s*(<[^<>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"  # (destination
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)"  # optional "title")
)
_LEFTOVER_LINK = re.compile(r"\]\(\s*<?\s*([^()\[\]\s]*)")


def _rebuild_link(m: re.Match[str]) -> str:
    text, destination = m.group(2), m.group(3)
    if destination.startswith("<"):
        destination = destination[1:-1]
    url = safe_url(destination) if _allowed_start(destination) else ""
    # An image becomes a link to it (or its alt text): no remote image loads in the chat.
    return f"[{text}]({url})" if url and text.strip() else text or url


def _unmake_definition(m: re.Match[str]) -> str:
    # Any definition, even to an allowed URL, would turn the matching [n] citation markers (or
    # other bracketed words) into links to wherever a document pointed them: show it as text.
    indent, label, destination = m.group(1), m.group(2), m.group(3)
    url = safe_url(destination.strip("<>")) if _allowed_start(destination.strip("<>")) else ""
    return f"{indent}{label}: {url}" if url else f"{indent}{label}"


def _allowed_start(destination: str) -> bool:
    return destination.strip().lower().startswith(("http://", "https://", "mailto:"))
