"""Citation excerpts end where a reader can stop: after a sentence (。 or .), else after a clause
(、 ， ,), else at a word boundary, with an ellipsis; never mid-word ("…employees who wo"). Also what
the engine puts in its citations and what Teams gets as a citation's abstract."""

from __future__ import annotations

import pytest

from cards.teams_message import citations_entity
from crag.config.engine_settings import REPO_ROOT, CragSettings
from crag.core.excerpt import ELLIPSIS, excerpt
from crag.engine import CragEngine
from crag.runtime.factory import build_engine, open_local_index

ALLOWANCE = (
    "The following are paid to employees approved for remote work. A monthly remote work allowance "
    "of ¥4,000, paid with salary to employees who worked remotely on 8 or more days in the previous "
    "month. The allowance is taxable income."
)


def test_a_short_text_is_kept_whole_with_its_spaces_made_single() -> None:
    assert excerpt("A short  passage.\n\nTwo lines.") == "A short passage. Two lines."


def test_english_ends_after_a_sentence_or_else_a_clause_in_the_second_half_of_the_limit() -> None:
    assert (
        excerpt(ALLOWANCE, 100) == "The following are paid to employees approved for remote work." + ELLIPSIS
    )
    # At 160 the first sentence would leave most of the room empty (a preview of a few words): the
    # last clause in reach instead.
    assert excerpt(ALLOWANCE, 160) == (
        "The following are paid to employees approved for remote work. A monthly remote work allowance "
        "of ¥4,000," + ELLIPSIS
    )


def test_english_without_a_sentence_end_in_reach_ends_at_a_word() -> None:
    text = "employees who worked remotely on eight or more days in the previous month " * 4
    cut = excerpt(text, 100)
    assert len(cut) <= 100 and cut.endswith(ELLIPSIS)
    head = cut[: -len(ELLIPSIS)]
    assert text.startswith(head) and text[len(head)] == " "  # a whole word, the next one not begun


def test_the_word_boundary_at_the_limit_itself_is_taken() -> None:
    assert excerpt("abcd efgh ijkl", 10) == "abcd efgh" + ELLIPSIS


def test_japanese_ends_after_a_sentence_or_else_a_clause() -> None:
    sentences = "使い切れなかった有給休暇は翌年度に限り繰り越せます。" * 3 + "繰越しできる日数は最大20日で"
    cut = excerpt(sentences, 60)
    assert cut.endswith("。" + ELLIPSIS) and len(cut) <= 60
    clauses = "繰越分と新規付与分を合わせた保有日数の上限は四十日で、" * 4
    cut = excerpt(clauses, 50)
    assert cut.endswith("、" + ELLIPSIS) and len(cut) <= 50 and clauses.startswith(cut[: -len(ELLIPSIS)])


def test_a_clause_comma_is_not_a_thousands_separator_nor_a_time() -> None:
    text = "The allowance is ¥4,000 per month and is paid at 10:00 with salary to each employee " * 3
    cut = excerpt(text, 60)
    assert "4," not in cut[-4:] and cut.endswith(ELLIPSIS)
    assert text[len(cut) - len(ELLIPSIS)] == " "  # ended at a word


def test_a_text_with_no_boundary_in_reach_is_cut_at_the_limit() -> None:
    cut = excerpt("x" * 300, 50)
    assert cut == "x" * 49 + ELLIPSIS


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> CragEngine:
    settings = CragSettings(
        CRAG_DOCS_DIR=str(REPO_ROOT / "sample_docs"),
        CRAG_INDEX_DIR=str(tmp_path_factory.mktemp("idx")),
        CRAG_EMBEDDINGS="off",
    )
    index, _ = open_local_index(settings)
    return build_engine(settings, index)


@pytest.mark.parametrize(
    "question", ["What is the monthly remote work allowance?", "有給休暇の繰越しは最大何日までできますか？"]
)
async def test_the_citations_teams_shows_end_at_a_boundary(engine: CragEngine, question: str) -> None:
    result = await engine.run(question)
    abstracts = [c["appearance"]["abstract"] for c in citations_entity(result).citation]
    assert abstracts and all(len(a) <= 160 for a in abstracts)
    passages = [" ".join(g.chunk.text.split()) for g in result.graded]
    for text in abstracts:
        if not text.endswith(ELLIPSIS):
            assert text in passages  # whole
            continue
        head = text[: -len(ELLIPSIS)]
        [passage] = {p for p in passages if p.startswith(head)}
        # After a sentence or a clause, or before a space of the passage it was cut from.
        assert head[-1] in "。.!?！？、，,;；:：" or passage[len(head)] == " ", (passage, text)
