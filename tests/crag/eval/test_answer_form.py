"""The evaluation's form check (crag/eval/form.py): each defect found where it is, and not where it is
not; the figures it adds to every set's metrics."""

from __future__ import annotations

import pytest

from crag.core.texts import NEAREST, QUOTED_FROM, REFUSAL, absence
from crag.eval.form import DEFECTS, form_defects
from crag.eval.metrics import FACT_ABSENT, Record, compute_metrics

BUDGET = 330


@pytest.mark.parametrize(
    ("answer", "language", "defects"),
    [
        # Seen on the Agents Playground: the title in brackets, then a sentence about another holiday.
        (
            "【休暇制度ガイド（年次有給休暇・特別休暇・病気休暇）】全社一斉の夏季休業は設けず、各自が"
            "7月1日〜9月30日の間に「夏季休暇」を3日取得します。 [1]",
            "ja",
            ["title_lead"],
        ),
        (
            "本規程は、倉庫内での作業の安全について定める。フォークリフトの速度は時速8km以下。 [1]",
            "ja",
            ["scope_lead"],
        ),
        (
            "【倉庫内安全規程（SH-100）】本規程は倉庫内の安全に適用する。 [1]",
            "ja",
            ["title_lead", "scope_lead"],
        ),
        ("This policy applies to all employees. The cap is ¥18,000 a night. [1]", "en", ["scope_lead"]),
        ("大阪   M3以上   ¥18,000 [1]", "ja", ["whitespace_run"]),
        ("| 大阪 | | ¥18,000 | [1]", "ja", ["empty_cell"]),
        ("大阪: none、¥18,000 [1]", "ja", ["empty_cell"]),
        ("Osaka: None, ¥18,000 [1]", "en", ["empty_cell"]),
        ("持ち物は次のとおりです。\n・社員証\n・\n[1]", "ja", ["dangling_marker"]),
        ("あ" * (BUDGET + 1), "ja", ["over_budget"]),
        (
            "VPN の接続先は次のとおり。 Connect with the Contoso VPN client before you open the portal. [1]",
            "ja",
            ["mixed_language"],
        ),
        (
            "The carry-over limit is 20 days: 未使用の年次有給休暇は翌年度に限り繰り越せる [1]",
            "en",
            ["mixed_language"],
        ),
        # Clean answers: the fact first, a short quote, the note where a passage is in the other language.
        ("大阪の宿泊上限（M3以上）は ¥18,000 です。 [1]", "ja", []),
        ("The Osaka hotel cap for M3 and above is ¥18,000. [1]", "en", []),
        (
            QUOTED_FROM["en"]["ja"] + "Connect with the Contoso VPN client before you open the portal. [1]",
            "ja",
            [],
        ),
        ("None of the plants is open on Sunday. [1]", "en", []),  # "None" as a word, not a value
        ("持ち物:\n・社員証\n・ノートPC [1]", "ja", []),
        (REFUSAL["ja"], "ja", []),
        ("", "ja", []),
    ],
)
def test_each_defect_is_found_where_it_is(answer: str, language: str, defects: list[str]) -> None:
    assert form_defects(answer, language, BUDGET) == defects  # type: ignore[arg-type]


def test_the_other_language_note_does_not_count_against_the_budget() -> None:
    note = QUOTED_FROM["en"]["ja"]
    body = "あ" * (BUDGET - 4) + " [1]"
    assert len(note + body) > BUDGET
    assert "over_budget" not in form_defects(note + body, "ja", BUDGET)


def _record(answer: str, kind: str) -> Record:
    return Record(
        in_corpus=True,
        expected_branch="correct",
        gold_file="a.md",
        answers=["¥18,000"],
        branch="correct",
        answer=answer,
        cited_files=["a.md"],
        retrieved_files=["a.md"],
        retrieved_texts=["x"],
        latency_ms=1.0,
        kind=kind,
        form=form_defects(answer, "ja", BUDGET),
    )


def test_metrics_count_form_defects_overall_per_defect_and_per_kind() -> None:
    records = [
        _record("【旅費規程】大阪は ¥18,000。 [1]", "paraphrase"),
        _record("大阪の宿泊上限は ¥18,000 です。 [1]", "paraphrase"),
        _record("大阪   ¥18,000 [1]", "literal"),
        _record("大阪は ¥18,000 です。 [1]", "literal"),
    ]
    m = compute_metrics(records)
    assert m["answer.form_defect"] == 0.5
    assert m["answer.form.title_lead"] == 0.25 and m["answer.form.whitespace_run"] == 0.25
    assert {f"answer.form.{d}" for d in DEFECTS} <= set(m)
    assert m["by_kind.paraphrase.answer.form_defect"] == 0.5
    assert m["by_kind.literal.answer.form_defect"] == 0.5


def test_a_table_row_printed_as_cells_is_a_form_defect_and_its_sentence_is_not() -> None:
    assert form_defects("区分: 世帯主で単身; 月額: ¥10,800 [1]", "ja", BUDGET) == ["cell_run"]
    assert form_defects("City: Osaka; Hotel cap: ¥18,000 [1]", "en", BUDGET) == ["cell_run"]
    assert form_defects("世帯主で単身の月額は¥10,800です。 [1]", "ja", BUDGET) == []
    assert form_defects("Note: bring your badge; the desk opens at 9:00. [1]", "en", BUDGET) == []


def test_green_on_the_answerable_its_precision_and_the_absence_statement_are_counted() -> None:
    said = absence(frozenset({"money"}), "ja") + NEAREST["ja"] + "夜勤は22時からです。 [1]"
    records = [
        _record("大阪の宿泊上限は ¥18,000 です。 [1]", "paraphrase"),  # green, holds the gold
        _record("大阪の宿泊上限は別表のとおり。 [1]", "paraphrase"),  # green, lacks it
        _record("¥18,000 [1]", "literal").model_copy(update={"branch": "ambiguous"}),
        _record(said, FACT_ABSENT).model_copy(
            update={"in_corpus": False, "answers": [], "branch": "ambiguous"}
        ),
        _record(said, FACT_ABSENT).model_copy(update={"in_corpus": False, "answers": []}),  # green: no
        _record(REFUSAL["ja"], FACT_ABSENT).model_copy(
            update={"in_corpus": False, "answers": [], "branch": "incorrect"}
        ),
        _record("夜勤は22時からです。 [1]", FACT_ABSENT).model_copy(
            update={"in_corpus": False, "answers": [], "branch": "ambiguous"}
        ),
    ]
    m = compute_metrics(records)
    assert m["answer.green_of_answerable"] == pytest.approx(2 / 3)
    assert m["answer.green_holds_gold"] == 0.5
    assert m["answer.absent_said"] == 0.25  # the green one does not count
    assert m["answer.absent_refused"] == 0.25
    assert m["answer.absent_said_answerable"] == 0.0
