"""Question terms in the other language, from a Japanese-English dictionary (JMdict), and in other
words of their own (Sudachi's synonym dictionary).

An employee asks in English about a Japanese document ("How much is the company dorm near the
Kumamoto plant?" against 「社員寮」), or in Japanese about an English one (「輸出管理室の内線」 against
"Export Control Office, ext. 3300"). The embeddings carry some meaning across languages; the lexical
evidence the grader and the composer weigh carries none, so the passage that answers grades as
unrelated. Here each question term gets its dictionary translations as alternatives: a passage in
the other language that holds a translation counts the term as found.

Only translations the index has ever seen are kept (a translation no passage holds can match
nothing, and it would crowd out one that can), at most MAX_ALTERNATIVES per term, in JMdict's order
of senses (the first sense is the common one) with its "common word" entries first. A run of
question terms that is a headword or gloss of its own ("night shift" -> 夜勤, 輸出 管理 -> "export
control") is translated as a whole, before its words one by one.

Employees also ask in other words of the same language than the documents use: 「妻のお産」
against 「配偶者の出産」, 「マイカー」 against 「自家用車」, 「残業」 against 「時間外労働」. Each run of
question terms that is a word of Sudachi's synonym dictionary also gets that word's synonyms (at
most MAX_SYNONYMS, its own lexeme's spellings first), on the same terms as translations.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal, Protocol

from crag.text.lang import detect_language
from crag.text.overlap import WeightedQuery, weighted_query
from crag.text.stats import TermStats
from crag.text.tokenize import TERMS_VERSION, Word

log = logging.getLogger(__name__)


class DocFreq(Protocol):
    def doc_freq(self, term: str) -> int: ...


Terms = tuple[str, ...]
# One translation: its terms, its sense's rank in the entry (0: the first sense), a common word.
Translation = tuple[Terms, int, bool]

MAX_ALTERNATIVES = 4
MAX_SYNONYMS = 4
# Longest run of question terms looked up as one headword or gloss.
MAX_RUN = 4
# A multi-word gloss is also found by its last word ("phone extension" by "extension"), ranked as if
# it were this many senses further down.
HEAD_WORD_PENALTY = 2
FORMAT = 1
_KEY_SEP = "\t"
_UNREADABLE = "bilingual lexicon %s unreadable (%s): question terms are not translated"
_STALE = (
    "bilingual lexicon %s was made by an older version (older term rules, or without synonyms): a few "
    "words go untranslated until it is remade (./run.sh does it, or python -m crag.text.lexicon)"
)
_SYNONYMS: Literal["syn"] = "syn"  # the entries' "language" of the synonym table


class Lexicon:
    """Japanese terms -> English terms and back, both as the index's own terms (Sudachi normalized
    forms, stemmed English), so a translation matches the passages exactly as their words do.

    Read from a SQLite file, one indexed lookup per run of question terms: the whole dictionary in
    Python objects would take ~365 MB and 4 s to load in every process."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # Read-only and shared by the event loop and worker threads; lookups are short and serialised.
        self._db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, check_same_thread=False)
        self._lock = threading.Lock()
        self._failed = False  # a lookup failed (logged once)
        self.headwords = int(self._meta("headwords") or 0)
        # Made under other term rules (TERMS_VERSION): still usable, most terms are unchanged, but
        # the words whose terms changed ("lost" is now "lose") are not found. Made before synonyms
        # were added (no "synonyms" entry; "none" when they could not be had): usable, without them.
        self.synonyms = self._meta("synonyms")
        self.stale = self._meta("terms") != str(TERMS_VERSION) or self.synonyms is None

    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def lookup(self, language: Literal["ja", "en", "syn"], run: Terms) -> list[Translation]:
        """The translations of one run of terms of `language` (empty when it is not a headword or gloss),
        or with "syn" its synonyms."""
        try:
            with self._lock:
                row = self._db.execute(
                    "SELECT value FROM entry WHERE lang = ? AND key = ?", (language, _KEY_SEP.join(run))
                ).fetchone()
            if row is None:
                return []
            return [(tuple(terms), int(rank), bool(common)) for terms, rank, common in json.loads(row[0])]
        except (sqlite3.Error, ValueError, TypeError) as e:
            # A file damaged after it was opened: this turn goes untranslated, it does not fail.
            if not self._failed:
                log.warning(_UNREADABLE, self.path, e)
                self._failed = True
            return []

    def alternatives(
        self, terms: tuple[str, ...], language: Literal["ja", "en"], known: Callable[[str], bool]
    ) -> dict[str, tuple[Terms, ...]]:
        """For each question term (in question order), its translations into the other language
        that the index knows, best first, then its synonyms; terms without one are left out."""
        translations = self._ranked(terms, language, known, MAX_ALTERNATIVES)
        synonyms = self._ranked(terms, _SYNONYMS, known, MAX_SYNONYMS)
        return {
            term: tuple(dict.fromkeys((*translations.get(term, ()), *synonyms.get(term, ()))))
            for term in dict.fromkeys(terms)
            if term in translations or term in synonyms
        }

    def _ranked(
        self,
        terms: tuple[str, ...],
        language: Literal["ja", "en", "syn"],
        known: Callable[[str], bool],
        limit: int,
    ) -> dict[str, tuple[Terms, ...]]:
        found: dict[str, list[tuple[int, Translation]]] = {}
        for length in range(min(MAX_RUN, len(terms)), 0, -1):
            for start in range(len(terms) - length + 1):
                run = terms[start : start + length]
                translations = self.lookup(language, run)
                for term in run:
                    found.setdefault(term, []).extend((length, t) for t in translations)
        out: dict[str, tuple[Terms, ...]] = {}
        for term, runs in found.items():
            # A term translated as part of a longer run keeps that reading first ("night shift" ->
            # 夜勤 before "night" -> 夜); then common words, then the entry's first senses.
            ranked = sorted(runs, key=lambda r: (-r[0], not r[1][2], r[1][1]))
            kept = [t[0] for _, t in ranked if all(known(x) for x in t[0])]
            unique = tuple(dict.fromkeys(kept))[:limit]
            if unique:
                out[term] = unique
        return out

    @classmethod
    def open(cls, path: Path, report: bool = True) -> Lexicon | None:
        """The lexicon at `path`, or None (logged, when `report`) when it is missing or unreadable:
        the grader and composer then work without translations, as before."""
        if not path.is_file():
            if report:
                log.info("no bilingual lexicon at %s (python -m crag.text.lexicon makes it)", path)
            return None
        lexicon = None
        try:
            lexicon = cls(path)
            if lexicon._meta("format") != str(FORMAT):
                raise ValueError(f"format {lexicon._meta('format')!r}, expected {FORMAT}")
        except (sqlite3.Error, ValueError) as e:
            if lexicon is not None:
                lexicon._db.close()
            if report:
                log.warning(_UNREADABLE, path, e)
            return None
        if lexicon.stale and report:
            log.warning(_STALE, path)
        return lexicon


def write(
    path: Path,
    ja_to_en: Mapping[Terms, Sequence[Translation]],
    synonyms: Mapping[Terms, Sequence[Translation]] | None = None,
) -> int:
    """Store the Japanese -> English table and its inverse (with multi-word glosses also under their
    last word), and the synonym table when given, at `path`, replacing it atomically. Returns the
    number of Japanese headwords."""
    en_to_ja: dict[Terms, list[Translation]] = {}
    for ja, translations in ja_to_en.items():
        for en, rank, common in translations:
            en_to_ja.setdefault(en, []).append((ja, rank, common))
            if len(en) > 1:
                en_to_ja.setdefault(en[-1:], []).append((ja, rank + HEAD_WORD_PENALTY, common))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(tmp)) as db:
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute(
            "CREATE TABLE entry (lang TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, "
            "PRIMARY KEY (lang, key)) WITHOUT ROWID"
        )
        tables: list[tuple[str, Mapping[Terms, Sequence[Translation]]]] = [
            ("ja", ja_to_en),
            ("en", en_to_ja),
            (_SYNONYMS, synonyms or {}),
        ]
        for language, table in tables:
            db.executemany(
                "INSERT INTO entry VALUES (?, ?, ?)",
                (
                    (language, _KEY_SEP.join(key), json.dumps(_unique(value), ensure_ascii=False))
                    for key, value in table.items()
                ),
            )
        db.executemany(
            "INSERT INTO meta VALUES (?, ?)",
            [
                ("format", str(FORMAT)),
                ("headwords", str(len(ja_to_en))),
                ("terms", str(TERMS_VERSION)),
                ("synonyms", str(len(synonyms)) if synonyms else "none"),
            ],
        )
        db.commit()
    tmp.replace(path)
    return len(ja_to_en)


def _unique(translations: Sequence[Translation]) -> list[list[object]]:
    best: dict[Terms, Translation] = {}
    for t in translations:
        kept = best.get(t[0])
        if kept is None or (not t[2], t[1]) < (not kept[2], kept[1]):
            best[t[0]] = t
    return [[list(terms), rank, common] for terms, rank, common in best.values()]


def table_from(
    entries: Iterable[tuple[Sequence[Terms], Sequence[tuple[Terms, int]], bool]],
) -> dict[Terms, list[Translation]]:
    """The Japanese -> English table from dictionary entries: (headwords, glosses with their sense
    rank, common word), each already turned into index terms."""
    table: dict[Terms, list[Translation]] = {}
    for heads, glosses, common in entries:
        for head in heads:
            table.setdefault(head, []).extend((en, rank, common) for en, rank in glosses)
    return table


class Translator:
    """Adds a question's translations to its weighted query, keeping those the index has seen."""

    def __init__(self, lexicon: Lexicon, known: Callable[[str], bool] | None = None, memo: int = 512) -> None:
        self._lexicon = lexicon
        self._known = known or (lambda _term: True)
        # The grader and the composer translate the same question (and its parts) in one turn.
        self._memo: OrderedDict[tuple[tuple[str, ...], str], dict[str, tuple[Terms, ...]]] = OrderedDict()
        self._memo_size = memo

    def __call__(self, query: WeightedQuery, words: Sequence[Word], question: str) -> WeightedQuery:
        if not query:
            return query
        alternatives = self.alternatives(words, question)
        return query.with_alternatives(alternatives) if alternatives else query

    def alternatives(self, words: Sequence[Word], question: str) -> dict[str, tuple[Terms, ...]]:
        """Each of the words' terms' translations (Lexicon.alternatives), in the other language
        than the question's."""
        language = detect_language(question)
        key = (tuple(w.term for w in words), language)
        found = self._memo.get(key)
        if found is None:
            found = self._lexicon.alternatives(key[0], language, self._known)
            self._memo[key] = found
            if len(self._memo) > self._memo_size:
                self._memo.popitem(last=False)
        return found


def question_query(stats: TermStats, question: str, translator: Translator | None) -> WeightedQuery:
    """The question's weighted terms (idf of the index), with their translations when a translator
    is given: what the grader and the composer both match passages against."""
    words = stats.words(question)
    query = weighted_query(words, stats.idf)
    return translator(query, words, question) if translator is not None else query


def translator_for(lexicon_path: str, index: DocFreq | None) -> Translator | None:
    """Question terms translated into the other language, when the lexicon has been made
    (`python -m crag.text.lexicon`; "" turns it off); only into terms the local index holds, when
    there is one (a remote index's vocabulary is unknown: every translation is kept)."""
    if not lexicon_path:
        return None
    lexicon = _open(Path(lexicon_path))
    if lexicon is None:
        return None
    known = (lambda term: index.doc_freq(term) > 0) if index is not None else None
    return Translator(lexicon, known)


_opened: dict[Path, Lexicon] = {}
_reported: set[Path] = set()  # missing or unreadable, said once
_opened_lock = threading.Lock()


def _open(path: Path) -> Lexicon | None:
    # One connection per process: engines and retrievers are rebuilt when the index changes. A
    # missing file is looked for again then (and by /api/health), so a lexicon made while the bot
    # runs is taken up; why it is missing is logged once, not at every look.
    with _opened_lock:
        lexicon = _opened.get(path)
        if lexicon is None:
            lexicon = Lexicon.open(path, report=path not in _reported)
            if lexicon is None:
                _reported.add(path)
            else:
                _opened[path] = lexicon
        return lexicon


def lexicon_status(lexicon_path: str) -> dict[str, object]:
    """For /api/health: whether question terms are translated, and how to turn it on when not."""
    if not lexicon_path:
        return {"enabled": False, "notice": "turned off (CRAG_LEXICON is empty)"}
    lexicon = _open(Path(lexicon_path))
    if lexicon is None:
        return {"enabled": False, "notice": "no lexicon: python -m crag.text.lexicon makes it"}
    status: dict[str, object] = {"enabled": True, "source": "JMdict", "headwords": lexicon.headwords}
    if lexicon.synonyms not in (None, "none"):
        status["synonyms"] = f"Sudachi synonym dictionary ({lexicon.synonyms} words)"
    if lexicon.stale:
        status["notice"] = (
            "made by an older version: run ./run.sh or python -m crag.text.lexicon to remake it"
        )
    return status
