"""Conversation: a follow-up that leans on the previous question is searched, graded and answered
as read with it; a self-contained next question is read on its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from crag.config.engine_settings import CragSettings
from crag.core.models import Branch, Turn
from crag.runtime.factory import build_engine, open_local_index
from crag.stages.rewrite.local import LocalKeywordRewriter
from crag.text.followup import in_context, leans_on_previous
from crag.text.tokenize import term_extractor

DOCS = {
    "hours.md": """# Working hours

## Core hours at the head office

Core hours at the head office are 10:30 to 14:30.

## Core hours at the plants

Office staff at the plants have core hours from 9:30 to 14:00.
""",
    "plants.md": """# Our plants

## Locations

The plants are in Hamamatsu and Kumamoto; a shuttle bus serves each plant from the station.
""",
    "vpn.md": """# VPN

## Dropped connections

If the VPN keeps dropping, restart the GlobalConnect client and check the Wi-Fi signal first.
""",
}
PREVIOUS = [Turn(question="What are the core hours at the head office?", answer="10:30 to 14:30.")]


@pytest.mark.parametrize(
    "question",
    [
        "what about for office staff at the plants?",
        "and at the plants?",
        "ok, and who approves that?",
        "じゃあ管理職だと？",
        "3直のほうは？",
        "親が2人とも要介護なんだけど、その場合は？",
        "課長だったら？",
        "ワインも出したら？",
        # "that" pointing back, in a question of any length (the issue lists it / that / それ / その).
        "does that change if I'm looking after a parent who needs care at home?",
        "so can I still book a meeting room at the plants on that day?",
        "is that ok?",
        # A new condition as a statement: 「…なんだけど」.
        "うち子ども3人なんだけど",
        # Discourse markers that carry the conversation on, opening or closing it.
        "but what if I'm off sick that week?",
        "oh wait, I work at the Kumamoto plant",
        "i'm on the night shift btw",
        "is the shuttle free tho?",
        "でも土日はどうなる？",
    ],
)
def test_elliptical_or_referring_questions_lean_on_the_previous_turn(question: str) -> None:
    assert leans_on_previous(question, PREVIOUS, content_words=3)
    assert in_context(question, PREVIOUS, 3) == f"{PREVIOUS[0].question} {question}"


@pytest.mark.parametrize(
    "question",
    [
        "My VPN keeps dropping, what should I do?",
        "What is the phone extension of the IT Service Desk?",
        "Is it ok to work from a cafe for the day?",
        "パスワードは何文字以上にする必要がありますか？",
        "ラオスの首都は？",
        "産後パパ育休と通常の育休、申出はそれぞれいつまで？",
        # "that" opening a relative clause or a clause of its own points at nothing before.
        "Where do I find the form that HR sends to new staff about core hours?",
        "Is the rule that we must badge in at the plants still valid?",
        "Does it mean that I lose my unused paid leave days at year end?",
        # The markers as parts of other words.
        "Buttons on the welcome card do nothing, why?",
        "Waiting list for the company dorm at the plants?",
        # "that" pointing at what the question itself said first.
        "I'm 2 hours short on my flex time this month, will that come out of my pay?",
        "do I need to bring lunch money on my first day or is that covered?",
    ],
)
def test_self_contained_questions_stand_alone(question: str) -> None:
    assert not leans_on_previous(question, PREVIOUS, content_words=5)
    assert in_context(question, PREVIOUS, 5) == question


@pytest.mark.parametrize("question", ["by when?", "いつまで？", "how much tho?", "なんで？"])
def test_a_question_of_no_content_word_leans_on_the_previous_turn(question: str) -> None:
    # Nothing of its own to search for: "by when?" asks about what was just asked.
    assert leans_on_previous(question, PREVIOUS, content_words=0)
    assert not leans_on_previous(question, [], content_words=0)


@pytest.mark.parametrize(
    ("question", "leans"),
    [
        ("申請の期限は？", True),
        ("どうやって申請するの？期限ある？", True),
        ("who should i contact?", True),
        ("which form do i need?", True),
        # A word naming the subject makes it stand alone.
        ("有休の申請期限は？", False),
        ("who should i contact about a broken badge reader?", False),
    ],
)
def test_a_question_asking_only_how_to_go_about_it_leans_on_the_previous_turn(
    question: str, leans: bool
) -> None:
    # 「申請の期限は？」 right after a question about the wedding gift asks about the gift's claim.
    rewriter = LocalKeywordRewriter(term_extractor())
    history = [Turn(question="結婚したらお祝い金っていくら？", answer="")]
    assert (rewriter.standalone(question, history) != question) is leans
    assert rewriter.standalone(question, []) == question


def test_a_question_naming_one_thing_besides_how_to_go_about_it_may_lean() -> None:
    # "driving" alone may be the previous turn's company car: tried in context if it finds little.
    rewriter = LocalKeywordRewriter(term_extractor())
    history = [Turn(question="社用車の鍵ってどこで借りるの？", answer="")]
    assert rewriter.may_lean("do i need to do anything before driving?", history)
    assert not rewriter.may_lean("do i need a licence to drive the forklift at night?", history)


def test_without_history_nothing_leans() -> None:
    assert not leans_on_previous("and at the plants?", [], 2)


@pytest.fixture
def settings(tmp_path: Path) -> CragSettings:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, "utf-8")
    return CragSettings(
        CRAG_DOCS_DIR=str(docs),
        CRAG_INDEX_DIR=str(tmp_path / "index"),
        CRAG_EMBEDDINGS="off",
        CRAG_CACHE_TTL=0,
    )


async def test_a_follow_up_is_answered_in_the_context_of_the_previous_question(
    settings: CragSettings,
) -> None:
    engine = build_engine(settings, open_local_index(settings)[0])
    alone = await engine.run("what about the plants?")
    followed = await engine.run("what about the plants?", PREVIOUS)
    assert "9:30" in followed.answer and followed.branch is not Branch.INCORRECT
    assert followed.question == "what about the plants?"  # the card shows the user's words
    assert followed.citations[0].file == "hours.md"  # led by the core hours
    # Read alone, the same words are answered first with the plants' locations.
    assert alone.citations[0].file == "plants.md"


async def test_a_self_contained_next_question_is_not_mixed_with_the_previous_one(
    settings: CragSettings,
) -> None:
    engine = build_engine(settings, open_local_index(settings)[0])
    result = await engine.run("My VPN keeps dropping, what should I do?", PREVIOUS)
    assert result.queries[0].lower().split()[0] != "core"
    assert not any(word in result.queries[0].lower() for word in ("core", "head", "office"))
    assert result.cited_files == ["vpn.md"] and "GlobalConnect" in result.answer
