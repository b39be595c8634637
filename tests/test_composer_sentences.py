"""The extractive composer leads with the sentence holding the asked kind of fact."""

from __future__ import annotations

from crag.generate.extractive import SENTENCE_WEIGHTS, ExtractiveComposer
from crag.models import Chunk, GradedChunk
from crag.text.stats import FlatStats
from crag.text.tokenize import term_extractor

EXPENSES = Chunk(
    id="expenses#1",
    file="expenses.md",
    title="経費精算",
    headers=["経費精算", "締め切り"],
    text=(
        "経費精算の締め切りについての問い合わせは、経理部の経費精算窓口（内線2200）が受け付けます。"
        "申請は翌月10日までにExpensePortから提出してください。"
    ),
)


async def test_a_when_question_is_answered_with_the_date_not_the_sentence_repeating_its_words() -> None:
    composer = ExtractiveComposer(FlatStats(term_extractor()), max_chars=80)
    kept = [GradedChunk(chunk=EXPENSES, score=0.9, kept=True)]
    answer = await composer.generate("経費精算の締め切りはいつ？", "ja", kept, [])
    # The first sentence repeats the question's words and holds a number (an extension); the
    # second holds the date that was asked for.
    assert "翌月10日" in answer.text and "内線" not in answer.text


async def test_sentence_rows_are_the_features_generate_scores() -> None:
    composer = ExtractiveComposer(FlatStats(term_extractor()))
    graded = [GradedChunk(chunk=EXPENSES, score=0.9)]
    rows = await composer.sentence_rows("経費精算の締め切りはいつ？", graded)
    assert [text[:6] for text, _ in rows] == ["経費精算の締", "申請は翌月1"]
    assert all(len(x) == len(SENTENCE_WEIGHTS) for _, x in rows)
    kind = len(SENTENCE_WEIGHTS) - 1
    assert (rows[0][1][kind], rows[1][1][kind]) == (-1.0, 1.0)  # date asked: absent, present


DESK = Chunk(
    id="desk#1",
    file="it-service-desk.md",
    title="IT Service Desk Guide",
    headers=["IT Service Desk Guide", "Contact"],
    text=(
        "- Service desk line for out-of-hours emergencies: ext. 4199.\n"
        "- Service desk line on weekdays: ext. 4100."
    ),
)


async def test_each_part_of_a_two_part_question_gets_its_own_sentence() -> None:
    composer = ExtractiveComposer(FlatStats(term_extractor()), max_chars=130)
    kept = [GradedChunk(chunk=DESK, score=0.9, kept=True)]
    question = "What's the service desk line, and which number do I call for out-of-hours emergencies?"
    answer = await composer.generate(question, "en", kept, [])
    # The emergency line holds the words of both parts: alone, it would lead both, and the weekday
    # number asked for first would go missing.
    assert "4199" in answer.text and "4100" in answer.text


VENDORS = Chunk(
    id="vendors#3",
    file="purchasing.md",
    title="購買ガイド",
    headers=["購買ガイド", "海外の取引先"],
    text=(
        "海外の取引先を登録する場合は、上記に加えて輸出管理室が取引先の確認を社内の審査システムで"
        "慎重に行うため、通常の審査期間に対して、さらに3営業日延びます。"
    ),
)


async def test_a_sentence_cut_down_keeps_the_number_asked_for() -> None:
    composer = ExtractiveComposer(FlatStats(term_extractor()), max_chars=60)
    kept = [GradedChunk(chunk=VENDORS, score=0.9, kept=True)]
    answer = await composer.generate("海外の取引先を登録するとき、審査は何日延びる？", "ja", kept, [])
    # The clauses repeating the question come first; cut around them alone, the answer would stop
    # before 「3営業日」.
    assert "3営業日" in answer.text and len(answer.text) <= 60


async def test_a_numbered_clause_keeps_its_number() -> None:
    leave = Chunk(
        id="leave#1",
        file="special-leave.txt",
        title="特別休暇 運用細則",
        headers=["特別休暇 運用細則", "1. 総則"],
        text="1.1 特別休暇はすべて有給とする。\n1.2 取得単位は1日とする。",
    )
    composer = ExtractiveComposer(FlatStats(term_extractor()), max_chars=120)
    answer = await composer.generate(
        "特別休暇の取得単位は？", "ja", [GradedChunk(chunk=leave, score=0.9)], []
    )
    # "1." is not a list marker here: stripped, the clause read "2 取得単位は1日とする。"
    assert "1.2 取得単位は1日とする。" in answer.text
