"""A question asking for two things is split into its parts.

The engine's use of the parts: tests/crag/test_research.py.
"""

from __future__ import annotations

import pytest

from crag.text.parts import question_parts, read_in_context


@pytest.mark.parametrize(
    ("question", "parts"),
    [
        ("ITヘルプデスクの内線は？あと受付時間も知りたい", 2),
        ("健康診断っていつから？それと再検査の補助はいくら？", 2),
        ("工場見学の申込期限と、外国籍の見学者がいる場合の確認期限は？", 2),
        ("さくら寮とみどり寮、寮費はそれぞれ月いくら？", 2),
        ("whats the netops emergency number, and when is the monthly maintenance?", 2),
        ("What are the deadlines for the security course and for export control basics?", 2),
        ("if the primary doesn't ack a page who gets it next, and after how long?", 2),
        ("結婚するんだけど、休みは何日もらえて、お祝い金はいくら？", 2),
        ("how many remote days do i get and by when do i have to book them?", 2),
    ],
)
def test_a_question_asking_two_things_has_two_parts(question: str, parts: int) -> None:
    assert len(question_parts(question)) == parts


@pytest.mark.parametrize(
    "question",
    [
        "有休って来年に持ち越せる？",
        "How often am I allowed to work from home each week?",
        "ベトナム出張の日当っていくら？一般社員です",  # the second sentence is context, not a question
        "80万円くらいの測定器を買いたい。見積もりって何社からとればいい？",
        "What is the difference between salt and pepper?",
        "在宅勤務していて、VPNがつながらないときはどうする？",  # the te-form piece asks nothing
        "「休んで、寝て、食べて」という標語はどこに貼ってある？",  # inside 「」
    ],
)
def test_a_question_asking_one_thing_stays_whole(question: str) -> None:
    assert question_parts(question) == [question]


def test_the_to_of_toki_is_not_a_conjunction() -> None:
    # 「失くしたときの」: splitting at that 「と」 gave 「ノートPCを失くした」 and 「きのCSIRTの内線と」.
    assert question_parts(
        "ノートPCを失くしたときのCSIRTの内線と、個人情報漏えいの窓口の内線を両方教えて"
    ) == [
        "ノートPCを失くしたときのCSIRTの内線",
        "個人情報漏えいの窓口の内線を両方教えて",
    ]
    assert (
        len(question_parts("さくら寮とみどり寮、寮費はそれぞれ月いくら？")) == 2
    )  # a real 「AとB、それぞれ」


def test_a_conjunction_opening_a_later_part_is_not_part_of_it() -> None:
    # Left in, 「あと」 became a search keyword of the second part (後, "after").
    assert question_parts("健康診断っていつからいつまで？あと再検査になったら補助いくら？") == [
        "健康診断っていつからいつまで?",
        "再検査になったら補助いくら?",
    ]
    assert question_parts("what's the desk extension? and when is it open?")[1] == "when is it open?"


@pytest.mark.parametrize(
    ("question", "second"),
    [
        # A part that leans on the one before it is searched and graded with it.
        (
            "which room is the day 1 orientation in and how many seats does it have?",
            "which room is the day 1 orientation in how many seats does it have?",
        ),
        (
            "if the primary doesn't ack a page who gets it next, and after how long?",
            "if the primary doesn't ack a page who gets it next after how long?",
        ),
        (
            "有休って半日でもとれる？時間単位だと年何時間まで？",
            "有休って半日でもとれる? 時間単位だと年何時間まで?",
        ),
        # A part that names its own subject stands alone.
        (
            "whats the netops emergency number, and when is the monthly maintenance?",
            "when is the monthly maintenance?",
        ),
        ("健康診断っていつから？それと再検査の補助はいくら？", "再検査の補助はいくら?"),
    ],
)
def test_a_part_leaning_on_the_one_before_is_read_with_it(question: str, second: str) -> None:
    parts = question_parts(question)
    assert read_in_context(parts) == [parts[0], second]
