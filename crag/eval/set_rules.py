"""An evaluation set's own rules: its rules.toml, read and checked before the set is.

What differs from set to set lives in the set's folder as data (the id prefix, how many questions of
each kind, the corpus' formats and languages, the names a web result must not carry), so a new set
needs a rules.toml and no code. What every set shares (the twelve fields, what each kind means) is
the checker's (crag/eval/check_set.py and the modules it runs).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RULES_FILE = "rules.toml"

# Every kind of question the sets use; IN_CORPUS_KINDS are answered from the corpus.
KINDS = (
    "literal",
    "paraphrase",
    "cross_language",
    "topic_mentioned_fact_absent",
    "off_topic",
    "multi_part",
    "follow_up",
)
IN_CORPUS_KINDS = frozenset({"literal", "paraphrase", "cross_language", "multi_part", "follow_up"})
LANGS = ("ja", "en")
FORMATS = (".md", ".txt", ".html", ".docx")
# How a plain-text document marks its headings: a line underlined with = or - ("underlined"), or a
# paragraph led by 【label】 or a short "Label. " ("lead-in").
TXT_HEADINGS = ("underlined", "lead-in")

_KEYS = {"id_prefix", "ja_en_gap", "kinds", "corpus", "web"}
_CORPUS_KEYS = {"formats", "languages", "txt_headings", "copy_of", "shares_nothing_with"}
_WEB_KEYS = {"company_markers", "markers_of_sets"}


class RulesError(ValueError):
    """A rules.toml that is missing, is not TOML or does not say what the checker needs."""


@dataclass(frozen=True)
class SetRules:
    id_prefix: str
    ja_en_gap: int  # the most one language may outnumber the other within a kind
    kinds: dict[str, int]  # kind -> how many questions; kinds not listed must not occur
    formats: dict[str, int]  # ".md" -> how many corpus files; formats not listed must not occur
    languages: dict[str, int]  # "ja" -> how many corpus documents
    txt_headings: str
    copy_of: Path | None  # corpus/ must be this folder's files, byte for byte
    shares_nothing_with: Path | None  # corpus/ must share no name and no content with this folder
    company_markers: tuple[str, ...]  # lower case; never in a web result


def load_rules(root: Path) -> SetRules:
    """The rules of the set in `root`, with the markers of the sets it names added to its own."""
    path = root / RULES_FILE
    table = _read(path)
    try:
        return _rules(root, table)
    except RulesError as exc:
        raise RulesError(f"{path}: {exc}") from None


def _rules(root: Path, table: dict[str, Any]) -> SetRules:
    if set(table) - _KEYS:
        raise RulesError(f"unknown keys {sorted(set(table) - _KEYS)}")
    corpus, web = _table(table, "corpus", _CORPUS_KEYS), _table(table, "web", _WEB_KEYS)
    markers = _strings(web, "company_markers")
    for other in _strings(web, "markers_of_sets"):
        other_web = _table(_read(root.parent / other / RULES_FILE), "web", _WEB_KEYS)
        markers += _strings(other_web, "company_markers")
    if any(m != m.lower() or not m.strip() for m in markers):
        raise RulesError("company markers must be non-empty and lower case (web results are lowered)")
    return SetRules(
        id_prefix=_text(table, "id_prefix"),
        ja_en_gap=_count(table, "ja_en_gap"),
        kinds=_counts(table, "kinds", KINDS),
        formats=_counts(corpus, "formats", FORMATS),
        languages=_counts(corpus, "languages", LANGS),
        txt_headings=_choice(corpus, "txt_headings", TXT_HEADINGS),
        copy_of=_folder(root, corpus, "copy_of"),
        shares_nothing_with=_folder(root, corpus, "shares_nothing_with"),
        company_markers=tuple(dict.fromkeys(markers)),
    )


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise RulesError(f"{path}: not found (a set is checked against the rules in its folder)") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RulesError(f"{path}: cannot read it ({exc})") from None


def _table(table: dict[str, Any], key: str, keys: set[str]) -> dict[str, Any]:
    value = table.get(key, {})
    if not isinstance(value, dict):
        raise RulesError(f"{key} must be a table")
    if set(value) - keys:
        raise RulesError(f"unknown keys in [{key}]: {sorted(set(value) - keys)}")
    return value


def _text(table: dict[str, Any], key: str) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value:
        raise RulesError(f"{key} must be a non-empty string, not {value!r}")
    return value


def _count(table: dict[str, Any], key: str) -> int:
    value = table.get(key)
    # bool is an int to isinstance; a count of true is a slip, not a number.
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise RulesError(f"{key} must be a count (a whole number, 0 or more), not {value!r}")
    return value


def _counts(table: dict[str, Any], key: str, allowed: tuple[str, ...]) -> dict[str, int]:
    counts = table.get(key)
    if not isinstance(counts, dict) or not counts:
        raise RulesError(f"{key} must be a table of counts by {', '.join(allowed)}")
    for name in counts:
        if name not in allowed:
            raise RulesError(f"{key}: {name!r} is not one of {', '.join(allowed)}")
    return {name: _count(counts, name) for name in counts}


def _choice(table: dict[str, Any], key: str, allowed: tuple[str, ...]) -> str:
    value = table.get(key, allowed[0])
    if value not in allowed:
        raise RulesError(f"{key} must be one of {', '.join(allowed)}, not {value!r}")
    return str(value)


def _strings(table: dict[str, Any], key: str) -> list[str]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RulesError(f"{key} must be a list of strings")
    return list(value)


def _folder(root: Path, table: dict[str, Any], key: str) -> Path | None:
    if key not in table:
        return None
    folder = (root / _text(table, key)).resolve()
    if not folder.is_dir():
        raise RulesError(f"{key}: {folder} is not a folder")
    return folder
