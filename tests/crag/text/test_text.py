"""Terms, sentences and language detection for Japanese and English."""

from __future__ import annotations

from crag.text.lang import detect_language
from crag.text.overlap import weighted_query
from crag.text.sentences import split_blocks, split_sentences
from crag.text.tokenize import TermExtractor, term_extractor


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
    # Each paragraph, list item and table row is a block: a sentence after the first of its block
    # goes on about what the one before it named.
    assert split_blocks(text) == [
        ["応力は物理量である。", "「これだ。」と彼は言った。"],
        ["The U.S. team, e.g. Mr. Smith, left.", "Then it ran!"],
        ["- first item"],
        ["- second item"],
        ["勤続年数: 6か月; 付与日数: 10日"],
    ]
    blocks = split_blocks("- 一つ目。二つ目。\n\n段落\nの続き。次。")
    assert blocks == [["- 一つ目。", "二つ目。"], ["段落 の続き。", "次。"]]


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


def test_a_past_form_matches_its_verb_and_chat_fillers_say_nothing() -> None:
    e = term_extractor()
    # "lost my badge" is the documents' "if you lose your badge"; "written" is "write".
    assert e.terms("lost my badge") == e.terms("lose your badge")
    assert e.terms("Who was the report written for?") == e.terms("who is the report to write for")
    # Written without the apostrophe, "whats" and "dont" are as empty as "what's" and "don't".
    assert e.terms("whats the max tho, dont know lol") == e.terms("what's the maximum, don't know")


def test_a_chat_clipping_matches_the_word_documents_spell_out() -> None:
    # "the company dorm" is the documents' "company dormitory" (and 寮 through the lexicon).
    e = term_extractor()
    for clipped, spelled in [
        ("dorm", "dormitory"),
        ("max", "maximum"),
        ("convo", "conversation"),
        ("yrs", "years"),
    ]:
        assert e.terms(f"the {clipped} rules") == e.terms(f"the {spelled} rules"), clipped
    # Clippings of two words are left alone: "10 min" may be minutes or a minimum, "HR" is not hours.
    assert e.terms("min") == ["min"] and e.terms("HR") == ["hr"]


# English lines are analysed piece by piece between their spaces, each piece once (TermExtractor._line).
_ENGLISH_LINES = [
    "During the 16th and 17th centuries, the Huguenots left France.",
    "16th-century records: see the U.S. e-mail archive (3.5% of 4,000 files) at 10:30 a.m.",
    '  Room "Yokohama" seats 1,200 people; ext. 4100 or dept. HR, don\'t call after 6pm  ',
    "Wi-Fi: COVID-19 rules for iPhone's 2nd floor users\tand x86_64 builds",
]


def test_an_english_line_piece_by_piece_gives_the_words_of_the_whole_line() -> None:
    extractor = TermExtractor()
    for line in _ENGLISH_LINES:
        whole = extractor._tokenize(line)  # the line given to Sudachi at once
        assert extractor.analyze(line) == whole, line
    # "16th" is one word inside a line, and two at the very start of one, as Sudachi reads them.
    assert [w.term for w in extractor.analyze("the 16th century")][:1] == ["16th"]
    assert [w.term for w in extractor.analyze("16th century")][:2] == ["16", "th"]


def test_english_pieces_are_remembered_and_japanese_lines_are_read_whole() -> None:
    extractor = TermExtractor()
    extractor.analyze("The employees submit the claim.")
    remembered = len(extractor._pieces)
    extractor.analyze("The employees submit the claim.")
    assert len(extractor._pieces) == remembered > 0
    # A line holding Japanese goes to Sudachi whole, English words in it included.
    before = len(extractor._pieces)
    assert [w.term for w in extractor.analyze("VPN接続は GlobalProtect を使う")] == [
        w.term for w in extractor._tokenize("VPN接続は GlobalProtect を使う")
    ]
    assert len(extractor._pieces) == before


def test_chat_shorthand_and_hyphenated_spellings_match_the_documents_words() -> None:
    t = term_extractor()
    # "wfh" is matched as the words of "work from home" ("remote work" in a policy holds "work").
    assert t.terms("how many wfh days do i get?") == t.terms("how many work from home days do i get?")
    # One word, written with a hyphen or without, in either language's text.
    assert t.terms("office wifi password") == t.terms("office Wi-Fi password")
    assert t.terms("Wi-Fiのパスワード")[0] == t.terms("wifi")[0]
    assert t.terms("send an e-mail") == t.terms("send an email")


def test_a_compound_verb_matches_the_noun_documents_write() -> None:
    t = term_extractor()
    # People ask with the verb, documents state the rule with its noun.
    assert "申し込み" in t.terms("それいつ申し込める？")  # a potential form, of a 五段 verb in む
    assert "申し込み" in t.terms("申込みは毎年4月と10月")
    assert "取り消し" in t.terms("予約って取り消したい") and "取り消し" in t.terms("取消しの手続き")
    assert "受け付け" in t.terms("土日も受け付けてもらえる？")  # 一段
    assert "受け付け" in t.terms("受付は平日のみ")
    assert "持ち帰り" in t.terms("家に持ち帰れる？")  # the potential of a 五段 verb in る
    assert "繰り越し" in t.terms("有休って繰り越せる？") and "繰り越し" in t.terms("年次有給休暇の繰越し")
    # The verb is read as its noun alone: its parts (持つ, 帰る; 申す, 込める) say little. A simple verb
    # stays a verb, and compound nouns are still read as their parts.
    assert t.terms("持ち帰って洗濯する") == ["持ち帰り", "洗濯"]
    assert t.terms("それいつ申し込める？") == ["申し込み"]
    assert t.terms("休暇を申請する") == ["休暇", "申請"]
    assert t.terms("会議室を使う") == ["会議", "室", "使う"]
