"""A question asking for two things is answered from the documents alone only when each part is."""

from __future__ import annotations

import pytest

from crag.grade.local import ANSWERS, LocalGrader
from crag.models import Chunk
from crag.text.parts import question_parts
from crag.text.stats import FlatStats
from crag.text.tokenize import term_extractor


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
    ],
)
def test_a_question_asking_one_thing_stays_whole(question: str) -> None:
    assert question_parts(question) == [question]


ALLOWANCE = Chunk(
    id="remote#3",
    file="remote_work.md",
    title="Remote work policy",
    headers=["Remote work policy", "Allowance"],
    text="Employees who work from home receive a monthly allowance of JPY 3,000 for internet and power.",
)
PARKING = Chunk(
    id="facilities#2",
    file="facilities.md",
    title="Facilities",
    headers=["Facilities", "Visitor parking"],
    text="Visitors park in bay B, next to reception; the barrier opens with the code from the host.",
)


async def test_a_part_no_passage_answers_holds_the_question_back_from_documents_alone() -> None:
    grader = LocalGrader(FlatStats(term_extractor()))
    chunks = [ALLOWANCE, PARKING]
    allowance = "How much is the monthly allowance for working from home"
    assert max(await grader.grade(allowance + "?", chunks)) >= ANSWERS
    # Both parts answered, each by its own passage: still from the documents.
    both = await grader.grade(allowance + ", and where do visitors park?", chunks)
    assert max(both) >= ANSWERS
    # The second part is answered nowhere: the allowance passage stays relevant but below 0.8.
    half = await grader.grade(allowance + ", and where is the staff gym?", chunks)
    assert 0.4 <= max(half) < ANSWERS
