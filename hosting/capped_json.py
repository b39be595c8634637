"""A request body parsed as JSON with its nesting capped before parsing: the Bot Framework endpoint
and the local Direct Line parse what anyone sends, before any authentication."""

from __future__ import annotations

import json
import re
from typing import Any

# Deeper JSON than any activity needs (Teams' and Adaptive Cards' nest about ten levels); Python's
# parser raises RecursionError at about a thousand, and code walking the result would too.
MAX_JSON_DEPTH = 64
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def too_deep(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the arrays and objects of the JSON `text` nest more than `limit` levels (checked
    before parsing, so a 5,000-level body costs a scan, not a RecursionError)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = deepest = 0
    for char in _NOT_BRACKET.sub("", _STRING.sub("", text)):
        depth += 1 if char in "[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                return True
    return False


def loads(raw: bytes, limit: int = MAX_JSON_DEPTH) -> Any:
    """Parse a request body: ValueError (or UnicodeDecodeError) if it is not JSON or nests too deep."""
    text = raw.decode("utf-8")
    if too_deep(text, limit):
        raise ValueError(f"JSON nested deeper than {limit} levels")
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
