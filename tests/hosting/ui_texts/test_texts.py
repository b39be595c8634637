"""The text catalog (hosting/ui_texts/catalog.toml): every key the code reads exists in both
languages, with the
same fields to fill in, and every stage, notice and branch a card can show has its text."""

from __future__ import annotations

import ast
import re
import string

from crag.core.models import Branch, Notice, Stage
from hosting.ui_texts import LANGS, TEXTS, t
from tests.paths import ROOT

CODE = ("app.py", "bot", "turn", "replies", "cards", "webchat", "crag", "feedback", "admin")


def keys_read_in_code() -> set[str]:
    """First arguments of t("...") calls that are string literals, in every app and engine module."""
    keys: set[str] = set()
    for top in CODE:
        path = ROOT / top
        for file in [path] if path.is_file() else sorted(path.rglob("*.py")):
            for node in ast.walk(ast.parse(file.read_text("utf-8"))):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id == "t"
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                ):
                    keys.add(node.args[0].value)
    return keys


def fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_every_key_read_in_the_code_is_in_the_catalog() -> None:
    used = keys_read_in_code()
    assert len(used) > 20  # the scan found the calls
    assert sorted(used - set(TEXTS)) == []


def test_every_text_has_both_languages_with_the_same_fields() -> None:
    for key, by_lang in TEXTS.items():
        assert set(by_lang) == set(LANGS), key
        assert all(by_lang[lang].strip() for lang in LANGS), key
        assert fields(by_lang["ja"]) == fields(by_lang["en"]), key
        # Japanese texts are Japanese (a copy-paste of the English would slip through otherwise).
        assert re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", by_lang["ja"]), key


def test_every_stage_notice_and_branch_has_its_text() -> None:
    for stage in Stage:
        assert t(f"stage.{stage.value}", "ja") and t(f"stage.{stage.value}", "en")
    for notice in Notice:
        assert t(f"notice.{notice.value}", "en")
    for branch in Branch:
        assert t(f"branch.{branch.value}", "en")


def test_keys_ending_in_a_language_name_are_texts_too() -> None:
    # [quoted_from.en] holds ja and en texts: the group must not be read as one text.
    assert t("quoted_from.en", "ja") == "（英語の文書より）"
    assert t("quoted_from.ja", "en").startswith("(from a Japanese document)")
