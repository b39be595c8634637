"""What kind of answer a question asks for, as far as the words tell."""

from __future__ import annotations

import re

# Questions asking for a date, a count or an amount: their answer holds a number.
_NUMBER_QUESTION = re.compile(
    r"いつ|何年|何月|何日|何時|何人|何個|何回|何歳|何%|何パーセント|何割|何倍|何キロ|何メートル|何円|いくつ|いくら|"
    r"どのくらい|どれくらい|どれだけ|何度|何世紀|何ヶ月|何か月|何週|何分|何秒|何社|何件|何台|何枚|何名|"
    r"\bwhen\b|\bhow (many|much|long|old|far|often|large|big|tall|high)\b|"
    r"\bwhat (year|date|time|day|month|percentage|percent|age|amount|number)\b|"
    r"\bwhich (year|date|day|month)\b",
    re.IGNORECASE,
)


def asks_for_number(question: str) -> bool:
    return bool(_NUMBER_QUESTION.search(question))


# A sentence that could answer "when / how many / how much": it holds a number.
_NUMBER = re.compile(
    r"[0-9０-９]|[〇一二三四五六七八九十百千万]+(年|月|日|人|個|回|歳|円|か月|ヶ月|世紀|倍|割)"
)


def has_number(text: str) -> bool:
    return bool(_NUMBER.search(text))
