"""The content gaps: questions the documents did not answer, grouped by the keywords they share.

Each question is read with the local keyword extraction the rewriter uses (crag/text/tokenize.py:
Sudachi terms of Japanese and English, stemmed, function words dropped). Groups are formed greedily:
the term most of the still ungrouped questions share becomes a group of every such question, and so
on while a term is shared by two or more; what is left stands alone. A group is labelled with its
term and the other terms at least half of its questions (and two or more) share, as people wrote
them. Sudachi's short units split compounds (駐車場 -> 駐車, 場), so a label may be part of a word.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from crag.cache.answer_cache import normalize_question
from crag.text.tokenize import Word

Analyze = Callable[[str], list[Word]]

# Word kinds that name a topic, best first: a shared noun says more than a shared verb. Numbers and
# affixes (5日, 〜様) name none.
_KIND_RANK = {"proper": 0, "noun": 0, "latin": 0, "predicate": 1}
# Words this common in general language (Zipf scale, crag/text/commonness.py) name no topic either:
# 日 (6.4), 年, 人, day, time, year would otherwise gather every "how many days" question into one.
GENERAL_ZIPF = 5.5
MAX_LABEL_TERMS = 4
MAX_EXAMPLES = 3


@dataclass(frozen=True)
class Asked:
    """One asking of a question that went unanswered by the documents."""

    question: str
    outcome: str  # "refused", "web" (answered from the web) or "partial" (documents and the web)


@dataclass
class Group:
    keywords: list[str]
    asked: list[Asked]
    outcomes: Counter[str] = field(default_factory=Counter)

    def examples(self) -> list[str]:
        """The distinct questions, most asked first (ties: first seen), at most MAX_EXAMPLES."""
        counts = Counter(normalize_question(a.question) for a in self.asked)
        first: dict[str, str] = {}
        for a in self.asked:
            first.setdefault(normalize_question(a.question), a.question)
        ordered = sorted(first, key=lambda k: -counts[k])
        return [first[k] for k in ordered[:MAX_EXAMPLES]]

    @property
    def distinct(self) -> int:
        return len({normalize_question(a.question) for a in self.asked})


@dataclass(frozen=True)
class _Read:
    asked: Asked
    terms: frozenset[str]


def group_by_keywords(asked: Sequence[Asked], analyze: Analyze) -> list[Group]:
    """Groups, largest first (ties: the label's alphabetical order); questions without a topic word
    form one group with no keywords, last."""
    words: dict[str, list[Word]] = {}  # term -> its words as written (for labels)
    rank: dict[str, tuple[int, float]] = {}
    reads: list[_Read] = []
    for a in asked:
        terms: set[str] = set()
        for w in analyze(a.question):
            if w.kind not in _KIND_RANK or w.zipf >= GENERAL_ZIPF:
                continue
            terms.add(w.term)
            words.setdefault(w.term, []).append(w)
            rank[w.term] = (_KIND_RANK[w.kind], w.zipf)
        reads.append(_Read(a, frozenset(terms)))

    def preference(term: str, df: int) -> tuple[int, int, float, str]:
        kind, zipf = rank[term]
        # Shared by more questions first; then nouns before verbs; then the rarer word in general
        # language (more specific); then the term itself, so equal inputs give equal groups.
        return (-df, kind, zipf, term)

    groups: list[Group] = []
    left = [r for r in reads if r.terms]
    while left:
        df = Counter(t for r in left for t in r.terms)
        term = min(df, key=lambda t: preference(t, df[t]))
        if df[term] < 2:
            break
        members = [r for r in left if term in r.terms]
        left = [r for r in left if term not in r.terms]
        groups.append(_group(term, members, words, preference))
    for r in left:  # each shares no term with another
        term = min(r.terms, key=lambda t: preference(t, 1))
        groups.append(_group(term, [r], words, preference))
    unread = [r for r in reads if not r.terms]
    groups.sort(key=lambda g: (-len(g.asked), g.keywords))
    if unread:
        groups.append(_group("", unread, words, preference))
    return groups


def _group(
    term: str,
    members: list[_Read],
    words: dict[str, list[Word]],
    preference: Callable[[str, int], tuple[int, int, float, str]],
) -> Group:
    label: list[str] = []
    if term:
        shared = Counter(t for r in members for t in r.terms if t != term)
        also = [t for t, n in shared.items() if n >= 2 and n * 2 >= len(members)]
        also.sort(key=lambda t: preference(t, shared[t]))
        label = [_as_written(t, words) for t in [term, *also][:MAX_LABEL_TERMS]]
    asked = [r.asked for r in members]
    return Group(label, asked, Counter(a.outcome for a in asked))


def _as_written(term: str, words: dict[str, list[Word]]) -> str:
    """The term as people wrote it most often (ties: the first written)."""
    forms = Counter(w.keyword for w in words[term])
    return max(forms, key=lambda k: (forms[k], -list(forms).index(k)))
