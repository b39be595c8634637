"""Quantities an asker states about their own case, and the bounds a rule sets on them."""

from __future__ import annotations

import pytest

from crag.text.quantity import Quantity, bound_fit, bounds, stated


@pytest.mark.parametrize(
    ("question", "quantities"),
    [
        ("live about 12km from the CLK and drive in. how much car allowance is that?", [(12, "km")]),
        ("3万ちょいの経費って課長のハンコだけでいける？", [(30_000, "yen")]),
        ("the floor lamp is like 45k yen to replace, do I escalate?", [(45_000, "yen")]),
        ("the repair quote is ¥48,000", [(48_000, "yen")]),
        ("ナイト3連チャンってアリなの？", [(3, "times")]),
        ("もう40日くらいたつけど間に合う？", [(40, "day")]),
        ("a trip of two nights to Osaka", [(2, "night")]),
        # Times of day, dates and years are not the asker's quantity.
        ("14:30からの遅番なんだけど、何時までに連絡？", []),
        ("6月10日までに出せばいい？", []),
        ("2026年の規程では？", []),
        ("有休って何日ある？", []),
        # Another currency is money but no yen: it is not compared with yen thresholds.
        ("spent $2k on the hotel, ok?", []),
        ("the flight was like 1.5k SGD", []),
        ("the lamp is like 45k yen", [(45_000, "yen")]),
    ],
)
def test_the_quantities_a_question_states(question: str, quantities: list[tuple[float, str]]) -> None:
    assert stated(question) == tuple(Quantity(v, u) for v, u in quantities)


@pytest.mark.parametrize(
    ("sentence", "inside", "outside"),
    [
        ("10 km to under 15 km: JPY 8,400 a month", [(12, "km"), (10, "km")], [(15, "km"), (12, "day")]),
        ("under 2 km: no allowance", [(1.5, "km")], [(2, "km")]),
        ("25 km or more: JPY 15,900 a month", [(25, "km"), (40, "km")], [(24, "km")]),
        ("¥30,000以上の経費は部門長の承認が必要", [(30_000, "yen")], [(29_000, "yen")]),
        ("3〜5万円の場合は課長決裁", [(40_000, "yen")], [(60_000, "yen")]),
        ("連続は2回まで", [(2, "times")], [(3, "times")]),
        ("支払日から90日を過ぎたものは精算できない", [(91, "day")], [(90, "day"), (40, "day")]),
        ("Damage over JPY 30,000 goes to the duty manager at once", [(45_000, "yen")], [(30_000, "yen")]),
        ("between 5 and 10 days", [(7, "day")], [(11, "day")]),
    ],
)
def test_a_bound_holds_the_quantities_inside_it_only(
    sentence: str, inside: list[tuple[float, str]], outside: list[tuple[float, str]]
) -> None:
    for value, unit in inside:
        assert bound_fit((Quantity(value, unit),), sentence) == 1.0, (value, unit)
    for value, unit in outside:
        assert bound_fit((Quantity(value, unit),), sentence) == 0.0, (value, unit)


def test_the_upper_end_of_a_range_is_not_a_bound_of_its_own() -> None:
    # "to under 15 km" alone would hold 3 km; the row is 10 to 15.
    assert len(bounds("10 km to under 15 km: JPY 8,400 a month")) == 1
    assert bound_fit((Quantity(3, "km"),), "10 km to under 15 km: JPY 8,400 a month") == 0.0


def test_a_rate_is_not_a_bound() -> None:
    assert bounds("1kmあたり¥23を支給する。") == ()


def test_years_and_months_are_one_length_of_time() -> None:
    # 「3年8か月」 is not three years and, apart, eight months (which 「6か月以上」 would hold).
    asked = stated("この4月で勤続3年8か月になるんだけど、有給って何日もらえる？")
    assert [(round(q.value, 2), q.unit) for q in asked] == [(3.67, "year")]
    assert bound_fit(asked, "勤続年数（基準日時点）: 6年6か月以上; 付与日数: 20日") == 0.0
    assert bound_fit(asked, "勤続年数: 3年以上4年未満; 付与日数: 14日") == 1.0


def test_a_lower_and_an_upper_bound_side_by_side_are_one_range() -> None:
    assert len(bounds("調達金額（税抜）: ¥100,000以上 ¥1,000,000未満; 必要な見積: 2社")) == 1
    assert len(bounds("over 5 km and under 10 km")) == 1
    # Apart, they are two rules: 30 days to claim, and nothing after 90.
    assert len(bounds("支払日から30日以内に申請し、90日を過ぎたものは精算できない")) == 2


def test_an_amount_with_tax_is_compared_with_a_threshold_without_it() -> None:
    asked = stated("税込10.5万円のモニター買いたいんだけど、見積って何社分いる？")
    assert bound_fit(asked, "調達金額（税抜）: ¥100,000未満; 必要な見積: 1社") == 1.0
    assert bound_fit(asked, "調達金額（税抜）: ¥100,000以上 ¥1,000,000未満; 必要な見積: 2社") == 0.0
    # Without a word on tax on either side, the amounts are compared as they are.
    assert bound_fit(stated("10.5万円のモニター"), "¥100,000以上 ¥1,000,000未満") == 1.0


def test_a_calendar_year_is_not_a_length_of_time() -> None:
    assert stated("1716年から1736年までの将軍は？") == ()
    assert stated("勤続25年だと何日？") == (Quantity(25, "year"),)


def test_and_a_half_and_a_row_stating_the_very_quantity() -> None:
    asked = stated("入社して丸5年半たったら有給何日になる？")
    assert asked == (Quantity(5.5, "year"),)
    assert bound_fit(asked, "勤続年数（基準日時点）: 5年6か月; 付与日数: 18日") == 1.0
    assert bound_fit(asked, "勤続年数（基準日時点）: 4年6か月; 付与日数: 16日") == 0.0
