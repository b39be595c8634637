"""One way to put a value someone else chose (an activity or conversation id, a user's text, a header)
into a log line: control characters, line and paragraph separators and lone surrogates escaped, and
the length capped, so the value can neither start a forged log line nor break the log's encoding."""

from __future__ import annotations

import re

# C0 and C1 controls (\n, \r, ESC, NUL, ...), DEL, Unicode line/paragraph separators, lone surrogates,
# and the backslash itself (so an escaped "\n" in the output cannot be mistaken for one written as text).
_UNSAFE = re.compile("[\\\\\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_SHORT = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    short = _SHORT.get(char)
    if short is not None:
        return short
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def esc(value: object, limit: int = 200) -> str:
    """`value` as one safe line of at most `limit` characters (before escaping), "…" marking a cut."""
    text = value if isinstance(value, str) else str(value)
    if len(text) > limit:
        text = text[:limit] + "…"
    return _UNSAFE.sub(_escape, text)
