"""The kind of fact a question asks for, and whether a piece of text holds one of that kind.

A passage about the right topic often lacks the asked fact: "how many files can I upload a day?"
against "200 messages a day", "what's the fine?" against a page listing red flags. Words alone do not
tell these apart, but the shape of the answer does: an amount has a currency, a duration a unit of
time, a phone number digits in groups, an address an @. A question whose kind is known and whose
passage holds nothing of that kind is very likely not answered by it.

Only kinds with a recognisable surface are listed; who / why / yes-no questions return None.
"""

from __future__ import annotations

import re
from functools import lru_cache

from crag.text.lang import detect_language
from crag.text.nfkc import nfkc

_I = re.IGNORECASE

_QUESTION: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("email", re.compile(r"メールアドレス|e-?mail address|mail address", _I)),
    (
        "phone",
        re.compile(
            r"電話番号|何番|内線|フリーダイヤル|電話(?:すれば|したら|する)|"
            r"phone number|extension|hotline number|what number|who (?:do|should|can) (?:i|we) call",
            _I,
        ),
    ),
    (
        "percent",
        re.compile(r"何%|何パーセント|何割|何パー|percentage|what percent|how many percent|\brate\b", _I),
    ),
    (
        "money",
        re.compile(
            r"いくら|何円|金額|費用|料金|補助額|上限額|(?:代|費|料|手当)(?:の|は)?上限|"
            r"\b(?:hotel|room|meal|spending|expense|taxi)\s+(?:cap|limit)\b|how much can i (?:spend|claim)|"
            r"how much|\bcosts?\b|\bprices?\b|\bfees?\b|"
            r"reimburs\w* (?:up to|limit)|spending limit|budget|allowance (?:amount|is)|"
            # Asked without "how much": is there money for it, does it cost me ("手当つくの？", "any
            # bonus for that?", "am i gonna have to pay?"); the answer is still an amount.
            r"手当|お金|祝い?金|見舞金|補助|自己負担|\ballowances?\b|\bsubsid\w*|\bbonus\w*|\bmoney\b|"
            r"chip in|\bpay\b|\bamount\b|per diem",
            _I,
        ),
    ),
    (
        "duration",
        re.compile(
            r"何日|何営業日|何時間|何年|何か月|何ヶ月|何カ月|何週|何分|何泊|"
            # 「どれくらいかかる」「どのくらいで」: how long; a bare 「どれくらい」 may ask an amount.
            r"(?:どれ|どの)(?:くらい|ぐらい)(?:の期間|の時間|かかる|前|以内|で|まで)|"
            r"how many (?:days?|hours?|years?|months?|weeks?|minutes?|nights?)|how much time|how long|"
            r"how (?:quickly|fast|soon|early|far (?:ahead|in advance))|in advance",
            _I,
        ),
    ),
    (
        "date",
        re.compile(
            r"いつ|何時|何年に|何年から|何世紀|締め?切り?|期限|何曜|"
            # Opening hours are times of day (「受付時間：平日9:00〜18:30」), not a duration.
            r"(?:受付|営業|利用|開館|開店|窓口|対応|診療|サポート)時間|時間帯|"
            r"opening hours|business hours|office hours|what hours|open until|"
            r"what time|^\s*when\b|\bby when\b|deadline|what date|which day|how often|"
            r"\bwhen (?:is|was|are|were|do|does|did|will|can|could|should|must|has|have)\b",
            _I,
        ),
    ),
    ("count", re.compile(r"何人|何台|何件|何個|何回|何名|何社|何枚|何冊|何本|いくつ|how many|number of", _I)),
)

_DIGIT = r"[0-9]"
# English numbers in words: "six quadrangles", "several years", "two business days".
_WORD_NUMBER = (
    r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|fifty|"
    r"hundred|thousand|several|a few|dozens?)\b"
)
_KANJI_NUMBER = r"[一二三四五六七八九十百千]+"
_TIME_UNIT = (
    r"(?:日|時間|年|か月|ヶ月|カ月|ヵ月|週間?|分|泊|営業日|days?|hours?|years?|months?|weeks?|"
    r"minutes?|nights?|business days?|calendar days?|working days?)"
)
_TEXT: dict[str, re.Pattern[str]] = {
    "email": re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+"),
    # An extension is often a bare number under a "内線" / "Extension" column header.
    "phone": re.compile(r"\d{2,5}-\d{2,4}-\d{3,4}|\+\d[\d -]{7,}|\d{3,}", _I),
    "percent": re.compile(r"\d\s*(?:%|パーセント|percent)|\d割|[一二三四五六七八九十]割", _I),
    "money": re.compile(
        r"\d\s*(?:万|億|千)?\s*(?:円|yen|jpy|usd|sgd|eur|dollars?|euros?|ユーロ|ドル|元)|[¥$€£]\s*\d|\b(?:jpy|usd|sgd|eur)\s*\d|"
        + _KANJI_NUMBER
        + r"万?円",
        _I,
    ),
    "duration": re.compile(
        r"(?:\d|" + _KANJI_NUMBER + "|" + _WORD_NUMBER + r")\s*" + _TIME_UNIT + r"|半日|終日|当日", _I
    ),
    # "When?" is answered by a date or time, but as often by a span: "within 8 hours", "2週間前".
    "date": re.compile(
        r"\d\s*(?:年|月|日|時|:\d\d|世紀)|毎月|毎週|毎年|翌月|翌日|前日|当日|月末|月初|曜日?|午前|午後|夜間?|朝|"
        r"(?:\d|" + _KANJI_NUMBER + "|" + _WORD_NUMBER + r")\s*" + _TIME_UNIT + "|"
        r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b|"
        r"\b1[0-9]{3}s?\b|\b20[0-9]{2}s?\b|\b(?:BP|BC|AD)\b|紀元|"
        r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)day|\b(?:daily|weekly|monthly|annually|immediately)\b|"
        r"\b(?:morning|evening|night|noon|midnight)\b|\bend of (?:the )?(?:month|week|year)|"
        r"\d+(?:st|nd|rd|th)\b",
        _I,
    ),
    "count": re.compile(r"\d|" + _KANJI_NUMBER + r"(?:人|台|件|個|回|名|社|枚|冊|本|つ)|" + _WORD_NUMBER, _I),
}


_QUOTED = re.compile(r"「[^」]*」|『[^』]*』")


# The grader (twice: its bound and its semantic feature) and the composer read the same question.
@lru_cache(maxsize=4096)
def asked_kinds(question: str) -> frozenset[str]:
    """Every kind the question asks for (a two-part question may ask for a date and an amount). A
    count names what is counted when it can be read: "count:file" for "how many files …", "count:人"
    for 「何人」."""
    # What a question quotes is its subject, not what it asks: 「…いつ、どこで…」という問い is not a date.
    text = _QUOTED.sub("「」", nfkc(question))
    kinds = {kind for kind, pattern in _QUESTION if pattern.search(text)}
    if "count" in kinds and (counted := _counted(text)):
        kinds = (kinds - {"count"}) | {f"count:{counted}"}
    return frozenset(kinds)


def holds_kind(text: str, kind: str) -> bool:
    text = nfkc(text)
    if kind.startswith("count:"):
        return _holds_count(text, kind.removeprefix("count:"))
    return bool(_TEXT[kind].search(text))


# "How many files can I upload?" is not answered by "200 messages a day": a count is of something.
_HOW_MANY = re.compile(r"\bhow many ((?:[a-z][\w-]* ?){1,3})", _I)
_COUNT_STOP = frozenset(
    "can do does did are is was were will would should must have has i we you they he she it per in on at "
    "for a an the to of there my our your".split()
)
_IRREGULAR_PLURALS = frozenset({"people", "staff", "children", "men", "women", "personnel"})
_JA_COUNTER = re.compile(r"何(人|台|件|個|回|名|社|枚|冊|本)")
_LATIN_WORD = re.compile(r"[A-Za-z]{2,}")


def _counted(question: str) -> str | None:
    """What a count question counts: the noun after "how many" (its plural, or its first word),
    or a Japanese counter (人, 台, 件 …)."""
    if m := _JA_COUNTER.search(question):
        return "名" if m.group(1) == "人" else m.group(1)  # 何人 is answered in 人 or 名
    m = _HOW_MANY.search(question)
    if m is None:
        return None
    words: list[str] = []
    for word in m.group(1).lower().split():
        if word in _COUNT_STOP:
            break
        words.append(word)
    plural = [w for w in words if w in _IRREGULAR_PLURALS or (w.endswith("s") and len(w) > 3)]
    noun = plural[-1] if plural else (words[0] if words else None)
    if noun is None:
        return None
    return noun if noun in _IRREGULAR_PLURALS else noun.removesuffix("s")


def _holds_count(text: str, counted: str) -> bool:
    """A number beside what is counted ("200 messages", "Seats: 16", 「3名」), in a passage of the
    question's script; in the other language the words cannot be compared, so any number counts."""
    japanese = detect_language(counted) == "ja"
    if (japanese and detect_language(text) != "ja") or (not japanese and not _LATIN_WORD.search(text)):
        return bool(_TEXT["count"].search(text))
    if japanese:
        units = "人名" if counted == "名" else counted
        # 「24万人」, 「3千名」: a number may end in a unit of ten thousand or a thousand.
        return bool(re.search(r"(?:\d|" + _KANJI_NUMBER + r")[万億千百]?\s*[" + units + "]", text))
    noun = re.escape(counted)
    number = r"(?:\d[\d,]*|" + _WORD_NUMBER + ")"
    near = r"(?:\W+\w+){0,2}?\W+"
    return bool(
        re.search(number + near + noun, text, _I)
        or re.search(r"\b" + noun + r"\w*" + near + number, text, _I)
    )


def kind_signal(kinds: frozenset[str], texts: list[str]) -> float:
    """+1 when a fact of an asked kind is in one of the texts, -1 when none is, 0 when the question's
    kind is not recognisable."""
    if not kinds:
        return 0.0
    return 1.0 if any(holds_kind(t, k) for t in texts for k in kinds) else -1.0


def kind_span(text: str, kinds: frozenset[str]) -> tuple[int, int] | None:
    """Where in the text the first fact of an asked kind is, or None when it holds none."""
    # Normalized character by character, to map a match back to the text (「…」 becomes "...").
    pieces = [nfkc(ch) for ch in text]
    starts = [0]
    for piece in pieces:
        starts.append(starts[-1] + len(piece))
    normal = "".join(pieces)
    spans = [
        found.span()
        for kind in kinds
        if not kind.startswith("count:") and kind in _TEXT
        if (found := _TEXT[kind].search(normal))
    ]
    if not spans:
        return None
    start, end = min(spans)
    # The characters whose normalized forms the match starts in and ends in.
    first = max(i for i, at in enumerate(starts[:-1]) if at <= start)
    last = max(i for i, at in enumerate(starts[:-1]) if at < end)
    return first, last + 1
