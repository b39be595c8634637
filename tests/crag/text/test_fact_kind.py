"""The asked kind of fact, and the grader's penalty when a passage holds nothing of that kind."""

from __future__ import annotations

import pytest

from crag.core.models import Chunk
from crag.stages.grade.local import LEXICAL, PARTIAL, LocalGrader, calibrate
from crag.text.fact_kind import asked_kinds, holds_kind, kind_signal
from crag.text.stats import FlatStats
from crag.text.tokenize import term_extractor


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("在宅勤務の手当はいくら？", "money"),
        ("How much is the home-office allowance?", "money"),
        ("有休って来年に何日まで持ち越せる？", "duration"),
        ("How long are CCTV recordings kept?", "duration"),
        ("経費精算の締め切りはいつですか？", "date"),
        ("When is payday?", "date"),
        ("来客用駐車場って何台分ある？", "count"),
        ("How many seats does the room have?", "count"),
        ("ITヘルプデスクの内線は何番？", "phone"),
        ("what's the email address of the service desk?", "email"),
        ("日曜出勤は何割増し？", "percent"),
        # How long, asked without "how long" or 何日 (employees' words).
        ("how quickly does QA need to hear about it?", "duration"),
        ("how fast do I have to tell someone?", "duration"),
        ("how far ahead do i need to book it?", "duration"),
        ("返事くるまでどれくらいかかる？", "duration"),
        ("どのくらいの時間内に報告しないとまずい？", "duration"),
        ("登録審査って何営業日？", "duration"),
        ("how often do we update stakeholders?", "date"),
        # Money asked without "how much" / いくら: is there any, does it cost me.
        ("午前中ずっと冷凍庫で作業してたんだけど、なんか手当つくの？", "money"),
        ("社員証なくした…再発行ってお金かかる？", "money"),
        ("子どもが生まれたらお祝い金って出ます？", "money"),
        ("will the company chip in for a desk chair?", "money"),
        ("is there any bonus for passing the exam?", "money"),
        ("lost my work phone, am i gonna have to pay?", "money"),
        ("what's the per diem for a 3 day trip?", "money"),
        # A phone number asked without "phone number" / 何番.
        ("who do i call if the WMS is down at night?", "phone"),
        ("照明がつかないときはどこに電話すればいい？", "phone"),
    ],
)
def test_the_asked_kind_is_read_from_the_question(question: str, kind: str) -> None:
    # A count may name what it counts ("count:seat").
    assert any(k == kind or k.startswith(f"{kind}:") for k in asked_kinds(question))


def test_a_bare_dore_kurai_asks_no_duration() -> None:
    # 「どれくらい出る？」 asks an amount as often as a time: no kind, rather than the wrong one.
    assert "duration" not in asked_kinds("在宅の手当ってどれくらい出る？")


@pytest.mark.parametrize(
    "question",
    [
        "Who chairs the Material Review Board?",
        "さくら寮でペットは飼える？",
        "What does Doctor Who do when his body is mortally damaged?",  # "when" inside a clause
        "Who is the Costa Rican President that went to Harvard?",  # "Costa" is not "cost"
    ],
)
def test_questions_without_a_recognisable_kind_get_none(question: str) -> None:
    assert asked_kinds(question) == frozenset()


def test_a_two_part_question_asks_for_both_kinds() -> None:
    assert asked_kinds("健康診断はいつまで？再検査の補助はいくら？") >= {"date", "money"}


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("上限は月額5,000円とする。", "money"),
        ("The allowance is SGD 800 a year.", "money"),
        ("An allowance of ¥3,000 per month is paid.", "money"),
        ("繰越しは最大20日まで。", "duration"),
        ("Footage is kept for 30 days.", "duration"),
        ("Applications must be filed two business days before the start.", "duration"),
        ("翌月10日までに申請する。", "date"),
        ("Salaries are paid on the 25th of each month.", "date"),
        ("The first report is due within 8 hours.", "date"),
        ("内線 4100", "phone"),
        ("Write to help@example.co.jp.", "email"),
        ("休日労働は35%の割増とする。", "percent"),
    ],
)
def test_a_passage_holding_that_kind_of_fact_is_recognised(text: str, kind: str) -> None:
    assert holds_kind(text, kind)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("交替勤務手当は、深夜労働の割増賃金とは別に支給します。", "money"),
        ("Files uploaded to AsaChat are scanned for malware.", "count"),
        ("フリーダイヤルの番号は社内ポータルに掲載", "phone"),
        ("Contact the service desk through the portal.", "email"),
        ("Applications open in the autumn.", "duration"),
    ],
)
def test_a_passage_on_the_topic_without_the_fact_is_not(text: str, kind: str) -> None:
    assert not holds_kind(text, kind)


def test_kind_signal_is_a_penalty_only_when_the_kind_is_known() -> None:
    asks_money = asked_kinds("安全靴の補助っていくら出る？")
    assert kind_signal(asks_money, ["安全靴は会社が支給します。", "購入補助は上限8,000円。"]) == 1.0
    assert kind_signal(asks_money, ["安全靴は会社が支給します。"]) == -1.0
    assert kind_signal(asked_kinds("さくら寮でペットは飼える？"), ["ペットは不可"]) == 0.0


@pytest.mark.parametrize(
    ("question", "counted"),
    [
        ("How many files can I upload to AsaChat per day?", "count:file"),
        ("how many personal devices can i register on MT-BYOD?", "count:device"),
        ("How many seats does the room have?", "count:seat"),
        ("how many people work at the osaka office?", "count:people"),
        ("来客用駐車場って何台分ある？", "count:台"),
        ("定員は何人？", "count:名"),  # 何人 is answered in 人 or 名
    ],
)
def test_a_count_names_what_it_counts(question: str, counted: str) -> None:
    assert counted in asked_kinds(question)


def test_a_count_is_held_by_a_number_beside_what_is_counted() -> None:
    files = asked_kinds("How many files can I upload to AsaChat per day?")
    limits = "Each user can send up to 200 messages per day to AsaChat. Files may be up to 20 MB each."
    assert kind_signal(files, [limits]) == -1.0  # a count of messages, a size of files
    assert kind_signal(files, ["You can upload 10 files a day."]) == 1.0
    assert kind_signal(files, ["Files per day: 10"]) == 1.0
    assert kind_signal(asked_kinds("定員は何人？"), ["定員は8名です。"]) == 1.0
    assert (
        kind_signal(asked_kinds("来客用駐車場って何台分ある？"), ["来客用駐車場は本館の裏にある。"]) == -1.0
    )
    # Across languages the counted word cannot be compared: any number holds the count.
    assert (
        kind_signal(asked_kinds("how many people work at the osaka office?"), ["大阪支社には約40名が勤務"])
        == 1.0
    )


async def test_a_passage_without_the_asked_kind_of_fact_is_at_most_partly_relevant() -> None:
    grader = LocalGrader(FlatStats(term_extractor()), words_only_answers=True)
    question = "How many files can I upload to AsaChat per day?"
    limits = Chunk(
        id="limits",
        file="ai.md",
        title="Generative AI rules",
        text="Each user can upload files to AsaChat and send up to 200 messages per day to AsaChat. "
        "Files uploaded to AsaChat may be up to 20 MB each.",
    )
    files = limits.model_copy(update={"id": "files", "text": limits.text + " Up to 10 files per day."})
    # Without the bound the passage would pass as an answer: it repeats every word of the question.
    rows, _ = await grader.feature_rows(question, [limits], semantic=False)
    assert calibrate(LEXICAL.logit(rows[0])) >= 0.8
    assert await grader.grade(question, [limits]) == [PARTIAL]
    assert (await grader.grade(question, [files]))[0] >= 0.8
    # A question whose kind is not recognised is graded as before.
    plain = "Which chat assistant can I upload files to?"
    rows, _ = await grader.feature_rows(plain, [limits], semantic=False)
    assert await grader.grade(plain, [limits]) == [round(calibrate(LEXICAL.logit(rows[0])), 3)]


def test_a_quoted_phrase_is_the_subject_not_the_question() -> None:
    question = "古代は何によって「生命は、いつ、どこで誕生したのか」という問いに答えていた？"
    assert asked_kinds(question) == frozenset()
    assert asked_kinds("「いつでも窓口」の内線は何番？") == frozenset({"phone"})


def test_a_count_of_people_may_be_in_ten_thousands() -> None:
    assert holds_kind("推計人数は約24万人である。", "count:名")
    assert holds_kind("参加者は3千名を超えた。", "count:名")


def test_opening_hours_are_asked_as_times_of_day() -> None:
    # 「受付時間」 is answered by 「平日9:00〜18:30」, a time of day: before, no kind was read, and the
    # hours sentence took the answer-kind penalty of an extension question.
    assert asked_kinds("ITヘルプデスクの内線と受付時間は？") == {"phone", "date"}
    assert asked_kinds("食堂の営業時間って？") == {"date"}
    assert asked_kinds("What are the help desk's opening hours?") == {"date"}
    assert kind_signal(asked_kinds("受付時間は？"), ["受付時間：平日9:00〜18:30"]) == 1.0
