"""Terms, sentences and language detection for Japanese and English."""

from __future__ import annotations

from crag.text.lang import detect_language
from crag.text.overlap import weighted_query
from crag.text.sentences import split_sentences
from crag.text.tokenize import term_extractor


def test_terms_normalize_japanese_and_stem_english() -> None:
    t = term_extractor()
    assert t.terms("空港を中心とする空域は何とよばれるか") == ["空港", "中心", "空域"]
    assert t.terms("How many Huguenots fled France?") == ["huguenot", "fled", "franc"]
    # Full-width letters are folded; particles, auxiliaries and question words are dropped.
    assert t.terms("ＶＰＮの設定はどうすればいいですか") == ["vpn", "設定"]


def test_keywords_are_readable() -> None:
    assert term_extractor().keywords("経費精算の締め切りはいつですか？") == ["経費", "精算", "締め切り"]


def test_sentences_japanese_english_lists_and_tables() -> None:
    text = (
        "応力は物理量である。「これだ。」と彼は言った。\n\n"
        "The U.S. team, e.g. Mr. Smith, left. Then it ran!\n"
        "- first item\n- second item\n"
        "| 勤続年数 | 付与日数 |\n|---|---|\n| 6か月 | 10日 |"
    )
    assert split_sentences(text) == [
        "応力は物理量である。",
        "「これだ。」と彼は言った。",
        "The U.S. team, e.g. Mr. Smith, left.",
        "Then it ran!",
        "- first item",
        "- second item",
        "勤続年数: 6か月; 付与日数: 10日",
    ]


def test_abbreviation_before_a_number_ends_no_sentence() -> None:
    # "ext. 4100" cut after "ext." once quoted "4199, available 24 hours a day." without its subject.
    text = (
        "- Phone: ext. 4100 from any site.\n"
        "- Emergencies: Ext. 4199, 24 hours. Approx. 5 days. Next, No. 3 applies."
    )
    assert split_sentences(text) == [
        "- Phone: ext. 4100 from any site.",
        "- Emergencies: Ext. 4199, 24 hours.",
        "Approx. 5 days.",
        "Next, No. 3 applies.",
    ]
    # Without a number after it, the period still ends the sentence.
    assert split_sentences("Call the ext. Then wait.") == ["Call the ext.", "Then wait."]


def test_language_detection() -> None:
    assert detect_language("VPNの設定は？") == "ja"
    assert detect_language("How do I reset my password?") == "en"


def test_rare_words_weigh_more_than_everyday_words() -> None:
    words = term_extractor().analyze("Which main river did Priestley study?")
    query = weighted_query(words, lambda term: 1.0)  # equal corpus idf: only word commonness differs
    assert query.weights["priestley"] > query.weights["main"]


def test_a_documents_abbreviation_matches_the_word_spelled_out() -> None:
    # "ext. 3300" answers "what is the extension of …" (and 内線, which translates to "extension").
    e = term_extractor()
    held = set(e.terms("Export Control Office: ext. 3300. Dept. of Quality, Tel. 052-123"))
    for asked in ("extension", "department", "telephone"):
        assert e.terms(asked)[0] in held, asked
    assert e.keywords("ext. 3300")[0] == "ext"  # shown as written
    assert e.terms("next") != e.terms("ext")  # whole words only
