"""The answer card's content and size, and the feedback store's rules."""

from __future__ import annotations

import json
from pathlib import Path

from cards.answer_card import FEEDBACK_ACTION, MAX_CARD_BYTES, answer_card
from crag.core.models import Branch, Chunk, Citation, CragResult, GradedChunk, WebOutcome, WebStatus
from feedback.sqlite_store import FeedbackOutcome, FeedbackStore
from tests.fakes.bot_connector import card_text, find_by_id


def _result(
    branch: Branch = Branch.CORRECT,
    answer: str = "有給休暇は最大20日まで繰り越せます。 [1]",
    cites: tuple[str, ...] = ("document", "web"),
) -> CragResult:
    chunk = Chunk(
        id="c1",
        file="leave_policy.md",
        title="休暇制度ガイド",
        headers=["休暇制度ガイド", "1. 年次有給休暇", "1.2 繰越しと上限"],
        text="繰越しできる日数は最大20日です。",
        url="http://localhost:3978/docs/leave_policy.md",
    )
    return CragResult(
        question="有給の繰越しは？",
        language="ja",
        branch=branch,
        graded=[GradedChunk(chunk=chunk, score=0.93, kept=True)],
        web=WebOutcome(status=WebStatus.OFF if branch is not Branch.CORRECT else WebStatus.NOT_NEEDED),
        answer=answer,
        refused=not cites,
        citations=[
            c
            for c in (
                Citation(number=1, kind="document", title=chunk.title, url=chunk.url, file=chunk.file),
                Citation(number=2, kind="web", title="Example", url="https://example.com/page"),
            )
            if c.kind in cites
        ],
    )


def test_card_shows_answer_branch_sources_behind_a_toggle_and_feedback() -> None:
    result = _result()
    card = answer_card(result)
    assert card["type"] == "AdaptiveCard" and card["version"] == "1.5"
    # The badge first, then the answer; its words are also the preview a client shows.
    assert card["body"][0]["id"] == "branch" and "社内文書" in card["body"][0]["text"]
    assert find_by_id(card, "answer")["text"] == result.answer  # type: ignore[index]
    assert card["fallbackText"].startswith("有給休暇は最大20日まで")
    # The sources sit in a hidden container that one button shows.
    sources = find_by_id(card, "sources")
    assert sources is not None and sources["isVisible"] is False
    toggle = find_by_id(card, "show_sources")["actions"][0]  # type: ignore[index]
    assert toggle["type"] == "Action.ToggleVisibility" and toggle["targetElements"] == ["sources"]
    assert "2" in toggle["title"]  # how many sources
    cited = find_by_id(card, "cited_files")["text"]  # type: ignore[index]
    assert (
        "[休暇制度ガイド](http://localhost:3978/docs/leave_policy.md)" in cited and "leave_policy.md" in cited
    )
    # The cited section and a plain-language match label, not the raw grade.
    assert "1.2 繰越しと上限" in cited and "関連度：高" in cited and "0.93" not in card_text(card)
    assert "https://example.com/page" in find_by_id(card, "web_urls")["text"]  # type: ignore[index]
    assert find_by_id(card, "scores") is None
    datas = [a["data"] for a in card["actions"]]
    assert [a["type"] for a in card["actions"]] == ["Action.Submit", "Action.Submit"]
    assert datas == [
        {"action": FEEDBACK_ACTION, "result_id": result.id, "reaction": "up"},
        {"action": FEEDBACK_ACTION, "result_id": result.id, "reaction": "down"},
    ]


def test_no_reply_the_bot_sends_carries_action_execute() -> None:
    """Action.Execute is only taken (bot/invokes.py), for cards of earlier releases; every reply sent
    today uses actions each client renders: the answer on every channel, the welcome, the thanks."""
    from cards.answer_card import thanks_card
    from cards.teams_message import answer_reply
    from cards.welcome_card import welcome_card

    channels = ("msteams", "webchat", "emulator")
    replies = [answer_reply(_result(b), channel) for b in Branch for channel in channels]
    cards = [r.card for r in replies] + [thanks_card(r.card, "up", "ja") for r in replies]
    cards += [welcome_card("CRAG Assistant", lang, ["有給休暇は何日？"]) for lang in ("ja", "en")]
    kinds = {a.get("type") for c in cards for a in _actions(c)}
    assert "Action.Execute" not in kinds and "Action.Submit" in kinds


def _actions(node: object) -> list[dict[str, object]]:
    if isinstance(node, dict):
        found = [node] if str(node.get("type", "")).startswith("Action.") else []
        return found + [a for v in node.values() for a in _actions(v)]
    if isinstance(node, list):
        return [a for v in node for a in _actions(v)]
    return []


def test_raw_grades_only_with_the_setting() -> None:
    card = answer_card(_result(), show_scores=True)
    assert "0.93" in card_text(find_by_id(card, "scores"))  # type: ignore[arg-type]
    assert find_by_id(card, "sources")["isVisible"] is False  # type: ignore[index]


def test_without_feedback_buttons_the_card_has_no_second_pair() -> None:
    # Teams shows its own thumbs on the message (feedbackLoop).
    card = answer_card(_result(), include_answer=False, feedback_buttons=False)
    assert (
        card["actions"] == [] and find_by_id(card, "helpful") is None and find_by_id(card, "answer") is None
    )


def test_a_partial_match_is_labelled_as_one_to_check() -> None:
    result = _result(Branch.AMBIGUOUS)
    result.graded[0].score = 0.55
    cited = find_by_id(answer_card(result, lang="en"), "cited_files")["text"]  # type: ignore[index]
    assert "partial match, please check" in cited


def test_card_language_and_web_off_notice() -> None:
    card = answer_card(_result(Branch.INCORRECT, "I cannot answer.", cites=()), lang="en")
    text = card_text(card)
    # No web result to answer from: the badge does not claim the web, and says where it looked.
    assert "Not found in the documents" in find_by_id(card, "branch")["text"]  # type: ignore[index]
    assert "From the web" not in text and "Web search is not configured" in text
    # "No relevant documents" is said only beside a web answer (here the badge says it).
    assert "No relevant internal documents" not in text


def test_an_ambiguous_answer_without_web_results_is_badged_as_documents_to_check() -> None:
    card = answer_card(_result(Branch.AMBIGUOUS, "The allowance is JPY 3,000. [1]", ("document",)), lang="en")
    badge = find_by_id(card, "branch")["text"]  # type: ignore[index]
    assert "Internal documents" in badge and "check" in badge and "web" not in badge


def test_huge_answer_is_shortened_to_fit() -> None:
    card = answer_card(_result(answer="あ" * 40_000))
    assert len(json.dumps(card, ensure_ascii=False).encode()) <= MAX_CARD_BYTES


async def test_feedback_store_records_updates_and_refuses_unknown(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "fb.sqlite3")
    await store.open()
    try:
        result = _result()
        await store.record_answer(result, "conv-1", "user-1", "emulator")
        first = await store.record_feedback(result.id, "up", "conv-1", "user-1", "emulator")
        assert first.outcome is FeedbackOutcome.STORED and first.language == "ja"
        # Same user, changed mind: one row, updated.
        second = await store.record_feedback(result.id, "down", "conv-1", "user-1", "emulator")
        assert second.outcome is FeedbackOutcome.UPDATED
        # Another conversation cannot rate this answer; an unknown id is refused.
        other = await store.record_feedback(result.id, "up", "conv-2", "user-2", "emulator")
        assert other.outcome is FeedbackOutcome.UNKNOWN_ANSWER
        unknown = await store.record_feedback("f" * 32, "up", "conv-1", "user-1", "emulator")
        assert unknown.outcome is FeedbackOutcome.UNKNOWN_ANSWER
        rows = await store.feedback_rows()
        assert len(rows) == 1
        row = rows[0]
        assert (
            row["reaction"] == "down"
            and row["question"] == result.question
            and row["answer"] == result.answer
        )
        assert row["branch"] == "correct" and json.loads(row["cited_files"]) == ["leave_policy.md"]
        assert row["conversation_id"] == "conv-1" and row["user_id"] == "user-1"
    finally:
        await store.close()
    # Durable: a new store on the same file sees the row.
    again = FeedbackStore(tmp_path / "fb.sqlite3")
    await again.open()
    try:
        assert len(await again.feedback_rows()) == 1
    finally:
        await again.close()


def test_the_badge_follows_what_the_answer_cites() -> None:
    def badge(branch: Branch, cites: tuple[str, ...]) -> str:
        return str(find_by_id(answer_card(_result(branch, "x [1]", cites), lang="en"), "branch")["text"])  # type: ignore[index]

    assert "Internal documents + web" in badge(Branch.AMBIGUOUS, ("document", "web"))
    # Web results were found but the answer quotes only documents: it does not claim the web.
    assert "check the sources" in badge(Branch.AMBIGUOUS, ("document",))
    assert "From the web" in badge(Branch.AMBIGUOUS, ("web",)) and "From the web" in badge(
        Branch.INCORRECT, ("web",)
    )
    assert "Not found in the documents" in badge(Branch.INCORRECT, ())
