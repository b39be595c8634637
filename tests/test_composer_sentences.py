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
