"""Content terms of Japanese and English text, for indexing, grading and sentence selection.

Sudachi (mode A: short units, so compounds match their parts) segments both languages; a compound
verb is the one exception, read as its noun (申し込める -> 申し込み, see _nominal). Japanese words
are reduced to Sudachi's normalized form (よば -> 呼ぶ); Latin-script words are lowercased and
Snowball-stemmed (Sudachi's normalized form would turn English into katakana). Function words
(particles, auxiliaries, pronouns, symbols, stop words) are dropped: they carry no topic.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from typing import Literal, NamedTuple

import Stemmer
from sudachipy import Dictionary, Morpheme, SplitMode, Tokenizer

from crag.text.commonness import zipf
from crag.text.nfkc import nfkc

_SKIP_POS = {"助詞", "助動詞", "補助記号", "空白", "記号", "代名詞", "感動詞", "接続詞", "副詞", "連体詞"}
# Verbs and nouns so common in Japanese prose that they say nothing about a topic.
_JA_STOP = frozenset(
    """
    為る 有る 居る 成る 出来る 言う 思う 事 物 様 為 所 時 中 上 等 又 其の 此の 何 誰 何処 何時
    如何 孰れ 行く 来る 呼ぶ れる られる ない 無い いる ある なる する よう こと もの ため とき
    ところ など について ついて よる おる くれる もらう 良い 貰う 下さる 頂く 教える 分かる 知る
    幾ら 幾つ 何故 どんな どう どの どれ 如何
    """.split()
)
# The last line: "how long / how often / what kind ..." ask for a kind of answer, not a topic.
_EN_STOP = frozenset(
    """
    a an the and or but if of at by for with about against between into through during
    before after above below to from up down in out on off over under again then once here
    there when where why how all any both each few more most other some such no nor not only
    own same so than too very can will just should now is are was were be been being have
    has had having do does did doing i me my we our you your he him his she her it its they
    them their what which who whom this that these those am would could may might must shall
    also as s t d ll m re ve y many much one us get got name called whose use used please
    isn aren wasn weren don doesn didn won couldn shouldn wouldn
    long often far old kind type happen happened
    whats wheres whens hows whos whys thats theres heres tho gonna wanna gotta lol pls plz ur
    dont doesnt didnt cant wont isnt arent wasnt werent shouldnt couldnt wouldnt
    """.split()
)
# The line above: chat spellings without the apostrophe ("whats the max …") and fillers.
# Irregular English verbs in their past forms, as their base: "lost my badge" is the documents'
# "if you lose your badge", and the lexicon's glosses are base forms ("to forget"). Past forms that
# are also common nouns or other words (left, saw, shot, sat, ground, bit, rose, lay) are not listed.
_IRREGULAR = {
    past: base
    for base, forms in {
        "lose": "lost",
        "forget": "forgot forgotten",
        "write": "wrote written",
        "pay": "paid",
        "send": "sent",
        "take": "took taken",
        "give": "gave given",
        "come": "came",
        "make": "made",
        "buy": "bought",
        "bring": "brought",
        "break": "broke broken",
        "catch": "caught",
        "choose": "chose chosen",
        "drive": "drove driven",
        "fall": "fell fallen",
        "feel": "felt",
        "find": "found",
        "hold": "held",
        "keep": "kept",
        "know": "knew known",
        "meet": "met",
        "run": "ran",
        "say": "said",
        "sell": "sold",
        "spend": "spent",
        "steal": "stole stolen",
        "tell": "told",
        "think": "thought",
        "understand": "understood",
        "wear": "wore worn",
        "fly": "flew flown",
        "begin": "began begun",
        "sleep": "slept",
        "teach": "taught",
        "throw": "threw thrown",
        "eat": "ate eaten",
        "drink": "drank drunk",
        "ride": "rode ridden",
        "stand": "stood",
        "tear": "tore torn",
        "lend": "lent",
        "build": "built",
        "mean": "meant",
        "hear": "heard",
        "become": "became",
        "freeze": "froze frozen",
        "hang": "hung",
        "shake": "shook shaken",
        "speak": "spoke spoken",
        "grow": "grew grown",
        "draw": "drew drawn",
        "blow": "blew blown",
        "seek": "sought",
        "stick": "stuck",
        "withdraw": "withdrew withdrawn",
        "oversleep": "overslept",
        "fight": "fought",
        "hide": "hid hidden",
        "wake": "woke woken",
        "bend": "bent",
        "swim": "swam swum",
        "sink": "sank sunk",
    }.items()
    for past in forms.split()
}
# Compound particles that Sudachi splits into content-looking pieces (において -> 置く, について -> 付く).
_COMPOUND_PARTICLES = re.compile(
    r"において|における|について|についての|に対して|に対する|によって|による|によると|に関して|に関する|"
    r"にとって|として|とともに|に基づき|に基づく|に伴い|に伴う|に応じて|を通じて|をもって|にわたって|にわたる"
)
# Abbreviations documents write where people spell the word out ("ext. 4100" answers "what is the
# extension of …", and 内線 translates to "extension"): each is matched as its word.
_ABBREVIATED = {
    "ext": "extension",
    "tel": "telephone",
    "dept": "department",
    "approx": "approximately",
    "mgr": "manager",
    "hq": "headquarters",
    "info": "information",
    # Clippings people type in chat ("company dorm", "max per month", "a convo school"), for the
    # word documents spell out. Not "min" (minute or minimum), "hr" (hour or HR) or "temp".
    "dorm": "dormitory",
    "dorms": "dormitories",
    "admin": "administrator",
    "admins": "administrators",
    "app": "application",
    "apps": "applications",
    "doc": "document",
    "docs": "documents",
    "max": "maximum",
    "mins": "minutes",
    "hrs": "hours",
    "yr": "year",
    "yrs": "years",
    "wk": "week",
    "wks": "weeks",
    "mgmt": "management",
    "govt": "government",
    "intl": "international",
    "mtg": "meeting",
    "mtgs": "meetings",
    "appt": "appointment",
    "req": "request",
    "reqs": "requests",
    "convo": "conversation",
    "vacay": "vacation",
    "pw": "password",
    "pwd": "password",
    "biz": "business",
    "config": "configuration",
    "ppl": "people",
    "bday": "birthday",
}
# Chat shorthand for a phrase ("how many wfh days do i get?" against "remote work ... days"): the
# phrase's words are matched.
_SPELLED_OUT = {
    "wfh": "work from home",
    "pto": "paid time off",
    "ooo": "out of office",
    "eod": "end of day",
}
_LATIN = re.compile(r"^[0-9a-z][0-9a-z'._-]*$")
_CONTRACTION = re.compile(r"'(s|t|re|ve|ll|d|m)$")
_HIRAGANA_ONLY = re.compile(r"^[\u3040-\u309f]+$")
# Scripts written without spaces between words (kana, CJK ideographs, full-width forms; Hangul and
# emoji too, being above U+2E80): a line holding any of them is analysed whole (TermExtractor._line).
_UNSPACED_SCRIPT = re.compile(r"[\u2e80-\U0010ffff]")
# Sudachi refuses inputs over ~49 KB; cut long text at line or sentence ends well below that.
_MAX_SEGMENT = 4000
_MEMO_LIMIT = 500_000
# Sudachi's ids of words out of its dictionary (numbers, unknown names) start here; they are shared.
_OUT_OF_DICTIONARY = 0xF0000000
# Pieces of English text remembered (about 240 bytes each): 100,000 are about 24 MB at most.
_PIECES_LIMIT = 100_000


# Bump whenever the rules above change the terms a text is turned into: the lexicon's keys are such
# terms (a lexicon made under other rules is remade by tools/bootstrap.sh), and so are a local
# index's (crag/ingest/local_target.py INDEX_FORMAT is bumped with it).
TERMS_VERSION = 4

WordKind = Literal["proper", "noun", "number", "predicate", "affix", "latin"]

# Kind by Sudachi POS (second level for nouns): what a word can tell about a question's subject.
_KINDS: dict[str, WordKind] = {
    "固有名詞": "proper",
    "数詞": "number",
    "動詞": "predicate",
    "形容詞": "predicate",
    "形状詞": "predicate",
    "接尾辞": "affix",
    "接頭辞": "affix",
}


class Word(NamedTuple):
    term: str  # normalized form: what matching compares
    keyword: str  # as written (dictionary form if inflected): what people read
    kind: WordKind
    zipf: float  # general-language frequency (Zipf scale, see commonness.py)


class TermExtractor:
    """Thread-safe (one Sudachi tokenizer per thread); cheap to share."""

    def __init__(self) -> None:
        self._dictionary = Dictionary(dict="core")
        self._local = threading.local()
        self._memo: dict[tuple[int, str], tuple[Word, ...]] = {}
        self._by_entry: dict[int, tuple[Word, ...]] = {}  # dictionary entry -> its words (terms only)
        self._pieces: dict[str, tuple[Word, ...]] = {}  # space-separated piece -> its words

    def _tokenizer(self) -> Tokenizer:
        tok = getattr(self._local, "tokenizer", None)
        if tok is None:
            tok = self._dictionary.tokenizer(mode=SplitMode.B)
            self._local.tokenizer = tok
        return tok

    def terms(self, text: str) -> list[str]:
        """Content terms in order of appearance (duplicates kept, for term frequencies)."""
        return [w.term for w in self.analyze(text, terms_only=True)]

    def keywords(self, text: str) -> list[str]:
        """Readable search keywords: content words as written (inflected ones in dictionary form)."""
        return list(dict.fromkeys(w.keyword for w in self.analyze(text)))

    def analyze(self, text: str, terms_only: bool = False) -> list[Word]:
        """Each content word: the term for matching, the keyword for people, and its kind. With
        `terms_only`, only each word's term is right (the keyword may be another spelling)."""
        text = _COMPOUND_PARTICLES.sub("、", nfkc(text))
        out: list[Word] = []
        for segment in _segments(text):
            out.extend(self._line(segment, terms_only))
        return out

    def _tokenize(self, text: str, terms_only: bool = False) -> list[Word]:
        tokenizer = self._tokenizer()
        if terms_only:
            return self._terms_only(tokenizer, text)
        memo = self._memo
        out: list[Word] = []
        for m in tokenizer.tokenize(text):
            surface = m.surface()
            # The same dictionary entry and surface always give the same words: most of a
            # corpus is repeats, so remember them (indexing speed is dominated by this loop).
            key = (m.word_id(), surface)
            words = memo.get(key)
            if words is None:
                words = self._remember(key, m)
            out.extend(words)
        return out

    def _remember(self, key: tuple[int, str], m: Morpheme) -> tuple[Word, ...]:
        """The words of a morpheme not met yet under its (entry, surface) key, now remembered: a
        compound verb's noun form (_nominal), else its short units' words (mode A)."""
        parts = m.split(SplitMode.A)
        if len(parts) > 1:
            words = _nominal(m) or tuple(
                w
                for p in parts
                for w in _words(p.surface(), p.normalized_form(), p.dictionary_form(), p.part_of_speech())
            )
        else:
            words = _words(key[1], m.normalized_form(), m.dictionary_form(), m.part_of_speech())
        if len(self._memo) > _MEMO_LIMIT:
            self._memo.clear()
        self._memo[key] = words
        return words

    def _terms_only(self, tokenizer: Tokenizer, text: str) -> list[Word]:
        """_tokenize's words for their terms only, remembered by dictionary entry alone: the
        entry's spellings (Tokyo, TOKYO; すごーい, すごーーい) have one term, and not reading each
        morpheme's surface saves about 7 % of the term extraction's instructions (callgrind). Words
        out of the dictionary (numbers, unknown names) share entry ids, so they are remembered with
        their surface."""
        by_entry = self._by_entry
        memo = self._memo
        out: list[Word] = []
        for m in tokenizer.tokenize(text):
            entry = m.word_id()
            words = by_entry.get(entry)
            if words is None:
                key = (entry, m.surface())
                words = memo.get(key)
                if words is None:
                    words = self._remember(key, m)
                if entry < _OUT_OF_DICTIONARY:
                    if len(by_entry) > _MEMO_LIMIT:
                        by_entry.clear()
                    by_entry[entry] = words
            out.extend(words)
        return out

    def _line(self, line: str, terms_only: bool = False) -> list[Word]:
        """A line's words. A line holding Japanese is analysed whole. A line of a spaced language
        (English) is analysed piece by piece between its spaces, each piece once, then remembered
        (_piece): that is 2-3 times faster on English documents."""
        if _UNSPACED_SCRIPT.search(line) is not None:
            return self._tokenize(line, terms_only)
        out: list[Word] = []
        pieces = line.split()
        # Each piece with the whitespace around it, as inside its line: Sudachi reads "16th" as
        # "16" + "th" at the very start of its input, and as one word after a space.
        first = " " if line[:1].isspace() else ""
        last = " " if line[-1:].isspace() else ""
        for k, piece in enumerate(pieces):
            lead = first if k == 0 else " "
            trail = last if k == len(pieces) - 1 else " "
            out.extend(self._piece(lead + piece + trail))
        return out

    def _piece(self, piece: str) -> tuple[Word, ...]:
        """The words of a piece of a spaced language (English) with the whitespace around it,
        remembered: most pieces of a corpus are repeats (" the ", " employees "). Sudachi reads it
        as it reads it inside its line (checked on the evaluation corpora: 8 of 4,158 paragraphs
        differ, by one term each, where a dictionary entry spans a space: "single sign-on",
        "Co., Ltd.")."""
        words = self._pieces.get(piece)
        if words is None:
            words = tuple(self._tokenize(piece))
            if len(self._pieces) > _PIECES_LIMIT:
                self._pieces.clear()
            self._pieces[piece] = words
        return words


def _words(surface: str, normalized: str, dictionary: str, pos: tuple[str, ...]) -> tuple[Word, ...]:
    # Sudachi's dictionary holds English phrases ("is it", "New York"): English is matched word by
    # word, so split them.
    phrase = _SPELLED_OUT.get(surface.lower(), surface)
    if " " not in phrase:
        word = _word(surface, normalized, dictionary, pos)
        return (word,) if word else ()
    return tuple(w for part in phrase.split() if (w := _word(part, part, part, pos)))


# A compound verb's noun form is its 連用形: 申し込む -> 申し込み, 受け付ける -> 受け付け.
_I_ROW = dict(zip("うくぐすつぬぶむる", "いきぎしちにびみり", strict=True))


def _nominal(m: Morpheme) -> tuple[Word, ...]:
    """The noun a compound verb makes: people ask 「いつ申し込める？」 and 「取り消したい」, documents
    write 「申込みは4月」 and 「取消しの手続き」. Mode A reads the verb as its parts (申す, 込める),
    which match nothing of the noun and say little alone, so the verb is read as its noun: in a
    question and in a document alike, 申し込める, 申し込む and 申込み are one term."""
    pos = m.part_of_speech()
    if pos[0] != "動詞":
        return ()
    verb, written = m.normalized_form(), m.dictionary_form()
    # The normalized form is the base verb, also of a potential form (申し込める -> 申し込む); a
    # verb in る is 五段 (持ち帰る -> 持ち帰り) when its POS says so or when it is the base of a
    # potential (持ち帰れる), else 一段 (受け付ける -> 受け付け).
    potential = written != verb and written[:-2] == verb[:-1]
    if verb[-1:] in _I_ROW and (verb[-1] != "る" or pos[4].startswith("五段") or potential):
        noun = verb[:-1] + _I_ROW[verb[-1]]
    elif verb.endswith("る") and pos[4].startswith(("上一段", "下一段")):
        noun = verb[:-1]
    else:
        return ()
    return (Word(noun, noun, "noun", zipf(noun)),)


def _word(surface: str, normalized: str, dictionary: str, pos: tuple[str, ...]) -> Word | None:
    if pos[0] in _SKIP_POS or pos[1] == "非自立可能":
        return None
    low = _CONTRACTION.sub("", surface.lower())
    if _LATIN.match(low):
        if low in _EN_STOP:
            return None
        if low[0].isdigit():
            return Word(low, surface, "number", zipf(low))
        if len(low) < 2:
            return None
        low = _ABBREVIATED.get(low.rstrip("."), low)  # Sudachi keeps the period of some ("dept.")
        low = _IRREGULAR.get(low, low)
        parts = low.split("-")
        if len(parts) > 1 and min(map(len, parts)) <= 2:
            low = "".join(parts)  # "wi-fi", "e-mail", "log-in" are also written "wifi", "email", "login"
        return Word(_stem(low), surface, "latin", zipf(low))
    if normalized in _JA_STOP or surface in _JA_STOP:
        return None
    if len(surface) == 1 and _HIRAGANA_ONLY.match(surface):
        return None
    kind = _KINDS.get(pos[1] if pos[0] == "名詞" else pos[0], "noun")
    keyword = dictionary if pos[0] in ("動詞", "形容詞") else surface
    return Word(normalized.lower(), keyword, kind, zipf(normalized.lower()))


_STEMMER = Stemmer.Stemmer("english")


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return str(_STEMMER.stemWord(word))


def _segments(text: str) -> list[str]:
    segments: list[str] = []
    for line in text.split("\n"):
        while len(line) > _MAX_SEGMENT:
            cut = max(line.rfind("。", 0, _MAX_SEGMENT), line.rfind(". ", 0, _MAX_SEGMENT))
            cut = cut + 1 if cut > 0 else _MAX_SEGMENT
            segments.append(line[:cut])
            line = line[cut:]
        if line.strip():
            segments.append(line)
    return segments


_shared: TermExtractor | None = None
_shared_lock = threading.Lock()


def term_extractor() -> TermExtractor:
    """The process-wide extractor (loading the Sudachi dictionary takes a moment)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = TermExtractor()
        return _shared
