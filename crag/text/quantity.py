"""Quantities a question states about the asker, and the bounds a sentence sets on them.

Employees ask about their own case with its number: "I live about 12km from the CLK, how much car
allowance is that?", 「3万ちょいの経費って課長のハンコだけでいける？」, "the lamp is like 45k yen, do I
need to escalate?", 「ナイト3連チャンってアリ？」. The rule that answers them is written as a bound on
that quantity, often one of several: "10 km to under 15 km: JPY 8,400 a month", 「3万円以上は部門長」,
「連続は2回まで」. Words do not tell these rows apart (each holds "km" and "JPY"); the numbers do.

`bound_fit` reads both and says whether a sentence sets a bound that the question's quantity (in the
same unit) falls inside.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from functools import lru_cache

from crag.text.nfkc import nfkc

_I = re.IGNORECASE

# Each unit's spellings, as they follow a number; the key is what is compared.
_UNITS: dict[str, str] = {
    "km": r"km|キロ(?:メートル)?|kilomet(?:er|re)s?",
    "yen": r"万円|千円|円|yen|jpy|万(?![人件回日時年])",
    "night": r"泊|nights?",
    "day": r"営業日|日間?|(?:business |working |calendar )?days?",
    "hour": r"時間|hours?|hrs?",
    "month": r"か月|ヶ月|カ月|ヵ月|months?",
    "year": r"年間?|years?",
    "person": r"人|名|people|persons",
    "times": r"回|連(?:チャン|続|勤)?|times",
    "percent": r"%|パーセント|percent",
}
_UNIT = "|".join(f"(?P<{key}>{spelling})" for key, spelling in _UNITS.items())
_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip
# A number: digits (1,234 / 1.5), with 万 / 千 / k, or an English word; "¥" or "JPY" before it is
# its unit. A number after 月 or "/" is a day of a date (「6月10日」), not a quantity.
_NUMBER = (
    r"(?<![\d月/:.,])(?P<yen_before>[¥￥]|jpy\s?)?(?P<num>\d[\d,]*(?:\.\d+)?|"
    + "|".join(rf"\b{w}\b" for w in _WORDS)
    + r")\s?(?P<scale>万|千|k\b)?"
)
_QUANTITY = re.compile(_NUMBER + r"\s?(?:" + _UNIT + r")?", _I)


@dataclass(frozen=True)
class Quantity:
    value: float
    unit: str
    tax: str | None = None  # an amount said to include ("in") or exclude ("ex") consumption tax


@dataclass(frozen=True)
class Bound:
    unit: str
    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False  # "over 10" excludes 10
    high_open: bool = False  # "under 15" excludes 15

    def holds(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below


def _read(match: re.Match[str]) -> Quantity | None:
    value = _bare(match)
    scale = (match.group("scale") or "").lower()
    unit = next((key for key in _UNITS if match.group(key)), None)
    spelled = (match.group("yen") or "") if unit == "yen" else ""
    if scale == "万" or spelled.startswith("万"):
        value *= 10_000
    elif scale in ("千", "k") or spelled.startswith("千"):
        value *= 1_000
    if match.group("yen_before"):
        unit = "yen"
    elif unit is None and scale in ("万", "k"):
        if _foreign(match):
            return None  # "$2k", "2k SGD": money, but not yen, and not comparable with a yen bound
        unit = "yen"  # 「3万ちょい」, "45k": an amount of money
    if unit is None or (unit == "year" and value >= 100):  # 「2026年」, 「1716年から」: a calendar year
        return None
    return Quantity(value, unit)


_FOREIGN_BEFORE = re.compile(r"(?:[$€£]|\b(?:usd|sgd|eur|us\$|s\$))\s?$", _I)
_FOREIGN_AFTER = re.compile(r"^\s?(?:usd|sgd|eur|dollars?|euros?|ドル|ユーロ)\b", _I)


def _foreign(match: re.Match[str]) -> bool:
    """An amount in another currency than yen, by its sign or code before it or its name after it."""
    text = match.string
    return bool(
        _FOREIGN_BEFORE.search(text[max(0, match.start() - 4) : match.start()])
        or _FOREIGN_AFTER.match(text[match.end() : match.end() + 10])
    )


# 「3年8か月」 is one length of time, not three years and, apart, eight months: as years, 3.667.
_YEARS_MONTHS = re.compile(r"(\d+)\s?(?:年|years?(?: and)?)\s?(\d+)\s?(?:か月|ヶ月|カ月|ヵ月|months?)", _I)
# Japanese amounts are often stated with or without the 10% consumption tax, and a rule's threshold
# in the other: 「税込10.5万円のモニター」 is under 「調達金額（税抜）: ¥100,000未満」.
_TAX_IN = re.compile(r"税込|tax included|including tax|incl\.? tax", _I)
_TAX_EX = re.compile(r"税抜|税別|tax excluded|excluding tax|before tax|pre-tax|excl\.? tax", _I)
CONSUMPTION_TAX = 0.10


# 「5年半」, 「1時間半」: and a half.
_AND_A_HALF = re.compile(r"(\d+)(年|か月|ヶ月|カ月|ヵ月|時間|日)半")


def _normalized(text: str) -> str:
    text = nfkc(text)
    text = _AND_A_HALF.sub(lambda m: f"{m[1]}.5{m[2]}", text)
    return _YEARS_MONTHS.sub(lambda m: f"{int(m[1]) + int(m[2]) / 12:.3f}年", text)


def _tax(text: str) -> str | None:
    return "in" if _TAX_IN.search(text) else "ex" if _TAX_EX.search(text) else None


@lru_cache(maxsize=4096)
def stated(question: str) -> tuple[Quantity, ...]:
    """The quantities a question states (not those it asks for: 何日 has no number)."""
    text = _normalized(question)
    tax = _tax(text)
    found = (_read(m) for m in _QUANTITY.finditer(text))
    return tuple(Quantity(q.value, q.unit, tax if q.unit == "yen" else None) for q in found if q is not None)


# Words that make a number a bound, before it ("under 10 km") or after it (「10km以上」, "10 km or
# more"). Each gives (low or high, open).
_BEFORE = {
    r"under|less than|below|fewer than": ("high", True),
    r"up to|within|at most|no more than|not more than|a maximum of|max(?:imum)?\.?": ("high", False),
    r"over|more than|above|exceeding|beyond|longer than": ("low", True),
    r"at least|a minimum of|min(?:imum)?\.?": ("low", False),
}
_AFTER = {
    r"以上|or more|or longer|or over|and over|and above|\+": ("low", False),
    r"を?超え?る?|を?過ぎ|より多い|より長い": ("low", True),
    r"以下|以内|まで|or less|or fewer|or shorter|and under|at most": ("high", False),
    r"未満|より少ない|より短い": ("high", True),
}
_BEFORE_RE = re.compile(r"(?:" + "|".join(f"(?P<b{i}>{w})" for i, w in enumerate(_BEFORE)) + r")\s+$", _I)
_AFTER_RE = re.compile(r"^\s?(?:" + "|".join(f"(?P<a{i}>{w})" for i, w in enumerate(_AFTER)) + ")", _I)
# "10 km to under 15 km", 「5〜10km」, "5-10 days", "between 5 and 10 days"
_JOIN = re.compile(r"^\s?(?:to (?:under |less than |below )?|[〜~～\-–]|から|and )\s?$", _I)
_OPEN_JOIN = re.compile(r"under|less|below")
# A lower bound and an upper one with only this between them bound one quantity together.
_TOGETHER = re.compile(r"^\s?(?:and|かつ|、|,)?\s?$", _I)


def bounds(sentence: str) -> tuple[Bound, ...]:
    """The bounds a sentence sets on quantities: "under 2 km", "10 km to under 15 km", 「3万円以上」."""
    return _read_sentence(sentence).bounds


@dataclass(frozen=True)
class _Sentence:
    bounds: tuple[Bound, ...]
    points: tuple[Quantity, ...]  # the quantities it states outside any bound (a row's 「5年6か月」)
    tax: str | None  # whether its amounts include ("in") or exclude ("ex") consumption tax


@lru_cache(maxsize=8192)
def _read_sentence(sentence: str) -> _Sentence:
    """What a sentence says of quantities: its bounds, its points, and the tax its amounts count."""
    text = _normalized(sentence)
    matches = list(_QUANTITY.finditer(text))
    found: list[Bound] = []
    points: list[Quantity] = []
    joined = -1  # the upper end of a range just read: not a bound of its own ("to under 15 km")
    low_end = 0  # where the last bound read ends
    for i, match in enumerate(matches):
        if i == joined:
            continue
        quantity = _read(match)
        nxt = matches[i + 1] if i + 1 < len(matches) else None
        if nxt is not None and _JOIN.match(text[match.end() : nxt.start()]):
            upper = _read(nxt)
            unit = upper.unit if upper else quantity.unit if quantity else None
            if upper is not None and unit == upper.unit:
                # A bare first number takes the second's unit and scale: 「3〜5万円」 is 30,000 to 50,000.
                low = quantity.value if quantity else _bare(match) * upper.value / (_bare(nxt) or 1)
                joiner = text[match.end() : nxt.start()].lower()
                found.append(
                    Bound(unit, low=low, high=upper.value, high_open=bool(_OPEN_JOIN.search(joiner)))
                )
                joined = i + 1
                continue
        if quantity is None:
            continue
        before = _BEFORE_RE.search(text[max(0, match.start() - 20) : match.start()])
        after = _AFTER_RE.match(text[match.end() : match.end() + 8])
        if before is None and after is None:
            points.append(quantity)
        for hit, table in ((before, _BEFORE), (after, _AFTER)):
            if hit is None:
                continue
            side, is_open = list(table.values())[int(next(k for k, v in hit.groupdict().items() if v)[1:])]
            last = found[-1] if found else None
            bound_start = max(0, match.start() - 20) + hit.start() if table is _BEFORE else match.start()
            if side == "low":
                found.append(Bound(quantity.unit, low=quantity.value, low_open=is_open))
            elif (
                last is not None
                and last.unit == quantity.unit
                and last.high == math.inf
                and _TOGETHER.match(text[low_end:bound_start])
            ):
                # 「¥100,000以上 ¥1,000,000未満」 is one range, not two bounds apart.
                found[-1] = replace(last, high=quantity.value, high_open=is_open)
            else:
                found.append(Bound(quantity.unit, high=quantity.value, high_open=is_open))
            low_end = match.end() + (hit.end() if table is _AFTER else 0)
    return _Sentence(tuple(found), tuple(points), _tax(text))


def _bare(match: re.Match[str]) -> float:
    raw = match.group("num").lower()
    return float(_WORDS[raw]) if raw in _WORDS else float(raw.replace(",", ""))


def bound_fit(question_quantities: tuple[Quantity, ...], sentence: str) -> float:
    """1 when the sentence bounds a quantity the question states and the quantity falls inside the
    bound ("12km" and "10 km to under 15 km"), or states that very quantity (「5年半」 and a table row
    「勤続年数: 5年6か月; 付与日数: 18日」); 0 otherwise. The point counts too: fit-minami +1, the other
    fitted sets unchanged. A bound the quantity falls outside counts nothing: half a point for it tied
    on the fitted sets, and nothing is the simpler rule."""
    if not question_quantities:
        return 0.0
    read = _read_sentence(sentence)
    basis = read.tax
    for bound in read.bounds:
        for quantity in question_quantities:
            value = quantity.value
            if quantity.tax and basis and quantity.tax != basis:
                value = value / (1 + CONSUMPTION_TAX) if basis == "ex" else value * (1 + CONSUMPTION_TAX)
            if quantity.unit == bound.unit and bound.holds(value):
                return 1.0
    same = any(
        q.unit == p.unit and abs(q.value - p.value) < 0.01 for q in question_quantities for p in read.points
    )
    return 1.0 if same else 0.0
