"""The one catalog of user-facing texts (hosting/ui_texts/catalog.toml), by key and language.

Japanese for Japanese questions or ja-* locales, English otherwise. Every layer reads its texts here:
the cards and the turn their messages, the Web Chat page its hints.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from crag.core import texts as engine_texts
from crag.core.texts import Lang as Lang  # the catalog's languages are the engine's

LANGS: tuple[Lang, ...] = ("ja", "en")
CATALOG = Path(__file__).with_name("catalog.toml")


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, dict[Lang, str]]:
    out: dict[str, dict[Lang, str]] = {}
    for key, value in table.items():
        name = f"{prefix}.{key}" if prefix else key
        if not isinstance(value, dict):
            raise ValueError(f"{CATALOG.name}: {name} is not a table")
        if set(value) == set(LANGS) and all(isinstance(value[lang], str) for lang in LANGS):
            out[name] = {lang: str(value[lang]).strip("\n") for lang in LANGS}
        else:
            out.update(_flatten(value, name))
    return out


TEXTS: dict[str, dict[Lang, str]] = _flatten(tomllib.loads(CATALOG.read_text("utf-8")))
# The engine's own texts live with the engine; the catalog serves them under the same keys.
TEXTS["refusal"] = dict(engine_texts.REFUSAL)
TEXTS.update({f"quoted_from.{doc}": dict(notes) for doc, notes in engine_texts.QUOTED_FROM.items()})


def t(key: str, lang: Lang, **values: object) -> str:
    text = TEXTS[key][lang]
    return text.format(**values) if values else text


def language_of(locale: str | None, fallback: Lang = "en") -> Lang:
    if not locale:
        return fallback
    return "ja" if locale.lower().startswith("ja") else "en"


def has_text(key: str) -> bool:
    return key in TEXTS


# The fixed "cannot answer from the provided information" text (the engine's refusal).
REFUSAL: dict[Lang, str] = engine_texts.REFUSAL
