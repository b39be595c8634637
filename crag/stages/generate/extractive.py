"""An extractive answer composer: the best sentences of the kept knowledge, concise, with citations.

Without a generative model the most faithful answer is the document's own words: pick the sentence
holding most of the question's information, add a second one when it brings more of it and the
answer stays short, and cite where each came from.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise
from pathlib import Path
from typing import Literal

from crag.core import weights as weights_file
from crag.core.excerpt import excerpt
from crag.core.models import Citation, GeneratedAnswer, GradedChunk, WebResult
from crag.core.protocols import AnswerRequest, TextSink
from crag.core.texts import NEAREST, QUOTED_FROM, REFUSAL, WEB_SAYS, absence
from crag.stages.grade.semantic import VectorSource, centred
from crag.text.bilingual import Translator, question_query
from crag.text.chunk_terms import ChunkTermsMemo
from crag.text.fact_kind import asked_kinds, kind_signal, kind_span
from crag.text.lang import detect_language
from crag.text.overlap import WeightedQuery, term_pairs
from crag.text.parts import question_parts
from crag.text.quantity import Quantity, bound_fit, stated
from crag.text.question import asks_for_number, has_number
from crag.text.sentences import LIST_ITEM, is_table_row, row_as_sentence, split_sentences
from crag.text.stats import TermStats

# A clause ends at a comma, semicolon or colon (Japanese or Latin), which stays with it.
_CLAUSE = re.compile(r"(?<=[,;:、，；：])")
# Below this many characters of budget, a cut-down sentence says too little to be worth adding.
MIN_EXCERPT = 60
# What a quoted passage adds besides its text: " [n]" and the space joining it to the next.
_MARKER_COST = 5
# A sentence that announces a list: 「次のいずれか」「以下のとおり」, "the following", a closing colon.
# Not 「5℃以下の冷蔵室」「小学生以下の見学」 (at most so much) or "the following day" (the next one).
_INTRODUCES_LIST = re.compile(
    r"次の|(?<![0-9０-９℃%％円日歳生人名件回分間月年点])以下の|下記の|以下のとおり|次のとおり|"
    r"following(?!\s+(?:days?|morning|evening|night|week(?:end)?|month|year|business|working|"
    r"calendar|shift|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b)|as follows|[:：]\s*$",
    re.I,
)
_MAX_ITEMS = 6
# A section label leading a sentence in the paragraph's text: 「【返却】 使用が終わったら…」.
_SECTION_LABEL = re.compile(r"^\s*【[^】]{1,30}】\s*(?=\S)")
# A plain-text paragraph's lead-in label: "Typhoons.", "Parking at the head office." (a few words, no
# verb of a sentence).
_LABEL = re.compile(
    r"^(?!.*\b(?:is|are|was|were|be|been|may|must|can|cannot|will|should|not|do|does|did|has|have|had)\b)"
    r"[A-Z][A-Za-z&/' -]{0,40}\.$"
)
# An answer quotes at most this many sentences besides a list's items, of which at most MAX_RUNNERS_UP
# are chosen for their score alone (after the complement and the sentence after the lead). Two rather
# than one: the second-best sentence of a passage is often the answer the best one only introduces
# (chosen on sample-docs, fit-hokuyo, fit-minami, jsquad-dev and squad-dev: 8 more answers holding the
# gold, none fewer; answers up to 24 characters longer on average).
MAX_SENTENCES = 4
MAX_RUNNERS_UP = 2
# The share of the question's information a second sentence must add to be quoted for it.
MIN_GAIN = 0.2
# Search engines cut snippets at about 300-320 characters.
WHOLE_SNIPPET_MAX = 320
# A sentence's score is SENTENCE_WEIGHTS . its features (_features, in SENTENCE_FEATURES' order):
# named, explained and recorded with how they were fitted in weights.toml beside this file.
SENTENCE_FEATURES = (
    "own_share",
    "framed_share",
    "source_grade",
    "position",
    "cosine",
    "number",
    "answer_kind",
    "follows_share",
    "bound_fit",
)
SENTENCE_WEIGHTS = weights_file.load(
    Path(__file__).with_name("weights.toml"), "sentence", SENTENCE_FEATURES
).weights
SEMANTIC = SENTENCE_FEATURES.index("cosine")
NUMBER = SENTENCE_FEATURES.index("number")
KIND = SENTENCE_FEATURES.index("answer_kind")
FOLLOWS = SENTENCE_FEATURES.index("follows_share")
BOUND = SENTENCE_FEATURES.index("bound_fit")
# How much a word only the earlier question of a follow-up holds weighs against the follow-up's own
# (chosen on sample-docs' and fit-hokuyo's follow-ups among 0.1, 0.25 and 0.5).
CONTEXT_WEIGHT = 0.25


@dataclass
class _Candidate:
    text: str
    source: int  # index into the sources list
    order: int  # position inside its source, to keep reading order
    score: float
    whole: bool = False  # a whole web snippet rather than one sentence
    features: list[float] | None = None  # what the score weighs (None: shares nothing with the question)
    item: bool = False  # a list item (its marker removed from text), or a table's row
    row: bool = False  # a table's row (said as a sentence, row_as_sentence)
    listed: bool = False  # quoted as an item of the list the previous sentence introduces
    terms: frozenset[str] = frozenset()  # the sentence's own terms (what it adds to the answer)
    pairs: frozenset[tuple[str, str]] = frozenset()  # its phrases (term_pairs)
    kinds: frozenset[str] = frozenset()  # the kinds of fact the question asks for


@dataclass
class _Source:
    citation: Citation
    weight: float  # the grade of the chunk (web results count as moderately relevant)


class ExtractiveComposer:
    name = "local-extractive"

    def __init__(
        self,
        index: TermStats,
        max_chars: int = 300,
        vectors: VectorSource | None = None,
        weights: Sequence[float] = SENTENCE_WEIGHTS,
        chunk_terms: ChunkTermsMemo | None = None,
        translator: Translator | None = None,
    ) -> None:
        self._index = index
        # A sentence in the other language than the question's shares its words only in translation.
        self._translator = translator
        # The grader's memo when built together (crag/runtime/factory.py): a chunk is tokenized once.
        self._chunk_terms = chunk_terms or ChunkTermsMemo(index)
        self._max_chars = max_chars
        # With the index's sentence vectors, a sentence also scores by how close it is in meaning
        # to the question: a paraphrase shares few words with its answer, another language none.
        self._vectors = vectors
        self._weights = tuple(weights)

    async def generate(self, ask: AnswerRequest, on_text: TextSink | None = None) -> GeneratedAnswer:
        language = ask.language
        # Japanese drops the subject a document has already named; English sentences keep theirs
        # (a pronoun at least), so only Japanese passages are named by their source's title.
        lead_in = language == "ja"
        # A follow-up asks one thing, as read with the earlier question: not that question again
        # (answered already) plus a second part.
        parts = question_parts(ask.question) if ask.latest is None else [ask.question]
        opening = _opening(ask, parts)
        # A question asking for several things gets each part's best sentences, within an equal
        # share of the budget: the best sentence for the whole question answers one part at most.
        share = (self._max_chars - (len(opening) + len(NEAREST[language]) if opening else 0)) // len(parts)
        own = frozenset(self._index.terms(ask.latest)) if ask.latest is not None else None
        sources, per_part = await self._per_part(parts, ask.chunks, ask.web, own)
        chosen = self._choose_for_parts(per_part, sources, lead_in, share, own)
        if not chosen:
            if opening:  # nothing near enough to quote: the statement alone
                return GeneratedAnswer(text=opening, absent=True)
            return GeneratedAnswer(text=REFUSAL[language], refused=True)
        return _answer(chosen, sources, language, lead_in, opening)

    async def _per_part(
        self,
        parts: list[str],
        chunks: Sequence[GradedChunk],
        web: Sequence[WebResult],
        own: frozenset[str] | None,
    ) -> tuple[list[_Source], list[tuple[WeightedQuery, list[_Candidate]]]]:
        """The sources (numbered alike for every part), and each part's query and candidate sentences."""
        sources: list[_Source] = []
        per_part = []
        for k, part in enumerate(parts):
            query = self._query(part, own)
            meaning = await self._meaning(part, chunks)
            # Each part is answered from the passages as graded for that part, when the engine
            # graded them so (the same parts): a passage is kept for the part it answers best.
            for_part = [
                g.model_copy(update={"score": g.part_scores[k]}) if len(g.part_scores) == len(parts) else g
                for g in chunks
            ]
            sources, candidates = self._candidates(query, part, for_part, web, meaning)
            per_part.append((query, candidates))
        return sources, per_part

    def _choose_for_parts(
        self,
        per_part: list[tuple[WeightedQuery, list[_Candidate]]],
        sources: list[_Source],
        lead_in: bool,
        share: int,
        own: frozenset[str] | None,
    ) -> list[_Candidate]:
        """Each part's sentences (_choose, within its share), a sentence quoted once, in order."""
        chosen: list[_Candidate] = []
        leads = _assign_leads([candidates for _, candidates in per_part])
        led = {(lead.source, lead.order) for lead in leads if lead is not None}
        for (query, candidates), lead in zip(per_part, leads, strict=True):
            # A sentence leading another part is quoted there, with that part's budget and numbers
            # kept: taken here as an extra, it would be cut down to this part's leftover room.
            others = led - {(lead.source, lead.order)} if lead is not None else led
            # A follow-up's extra sentences add what its own words ask, not the earlier question's
            # subject again: 「夜勤は？」 after 「早番って何時から？」 does not get the 早番 row.
            focus = _framed(query, own, 0.0) if own is not None else None
            for cand in self._choose(query, candidates, sources, lead_in, share, lead, others, focus):
                if not any(c.source == cand.source and c.order == cand.order for c in chosen):
                    chosen.append(cand)
        return chosen

    def _query(self, question: str, own: frozenset[str] | None = None) -> WeightedQuery:
        """The question's weighted terms; for a follow-up read with the earlier turn, `own` are the
        terms of the user's own words, and the earlier turn's weigh CONTEXT_WEIGHT."""
        query = question_query(self._index, question, self._translator)
        # The earlier turn's words only frame a follow-up: 「熊本工場だと何月？」 after 「健康診断っ
        # ていつ？本社勤務です」 is answered by the 熊本工場 row, not by the one naming 本社.
        return query if own is None else _framed(query, own, CONTEXT_WEIGHT)

    async def _meaning(self, question: str, chunks: Sequence[GradedChunk]) -> dict[str, dict[str, float]]:
        """Per chunk id, each sentence's centred cosine to the question (empty without vectors)."""
        if (
            self._vectors is None
            or not self._vectors.vectors_ready
            or not chunks
            or self._weights[SEMANTIC] <= 0
        ):
            return {}
        question_vector = await self._vectors.query_vector(question)
        if question_vector is None:
            return {}
        out: dict[str, dict[str, float]] = {}
        for g in chunks:
            found = self._vectors.sentence_vectors(g.chunk.id)
            if found is not None and len(found[0]):
                texts, matrix = found
                cosines = matrix.astype("float32") @ question_vector
                out[g.chunk.id] = {t: centred(float(c)) for t, c in zip(texts, cosines, strict=True)}
        return out

    def _candidates(
        self,
        query: WeightedQuery,
        question: str,
        chunks: Sequence[GradedChunk],
        web: Sequence[WebResult],
        meaning: dict[str, dict[str, float]] | None = None,
    ) -> tuple[list[_Source], list[_Candidate]]:
        sources: list[_Source] = []
        candidates: list[_Candidate] = []
        kinds = _kinds(question)
        quantities = stated(question)
        for g in chunks:
            c = g.chunk
            citation = Citation(
                number=0, kind="document", title=c.title, url=c.url, file=c.file, excerpt=excerpt(c.text)
            )
            sources.append(_Source(citation, g.score))
            tokens = self._chunk_terms.of(c)
            candidates.extend(
                self._sentences(
                    query,
                    [(x.text, tuple(x.terms), x.follows) for x in tokens.sentences],
                    frozenset(tokens.header_terms),
                    len(sources) - 1,
                    g.score,
                    kinds,
                    (meaning or {}).get(c.id, {}),
                    frozenset(tokens.lead_terms),
                    labels=True,
                    quantities=quantities,
                )
            )
        for w in web:
            citation = Citation(number=0, kind="web", title=w.title, url=w.url, excerpt=excerpt(w.snippet))
            sources.append(_Source(citation, 0.6))  # every part numbers the sources alike
            if kind_signal(kinds - {"number"}, [w.snippet]) < 0:
                # Nothing grades the web's results here: a snippet without the kind of fact asked
                # for (no amount for "up to how much?") is about the topic at best, not an answer.
                continue
            context = frozenset(self._index.terms(w.title))
            split = [
                (x, tuple(self._index.terms(x)), i > 0) for i, x in enumerate(split_sentences(w.snippet))
            ]
            sentences = self._sentences(
                query, split, context, len(sources) - 1, 0.6, kinds, quantities=quantities
            )
            if sentences and len(w.snippet) <= WHOLE_SNIPPET_MAX:
                # A snippet is already the search engine's excerpt around the match, and its answer
                # often sits in the sentence before or after the one that repeats the question:
                # quote it whole rather than cut it into sentences.
                best = max(c.score for c in sentences)
                candidates.append(_Candidate(w.snippet.strip(), len(sources) - 1, 0, best, whole=True))
            else:
                candidates.extend(sentences)
        return sources, candidates

    def _sentences(
        self,
        query: WeightedQuery,
        split: Sequence[tuple[str, Sequence[str], bool]],  # (sentence, terms in order, goes on from the last)
        context: frozenset[str],
        source: int,
        weight: float,
        kinds: frozenset[str],
        meaning: dict[str, float] | None = None,
        lead: frozenset[str] = frozenset(),  # terms of the sentence the first one goes on from
        labels: bool = False,  # a document's: its paragraphs may lead with a label
        quantities: tuple[Quantity, ...] = (),  # what the question states of the asker's case
    ) -> list[_Candidate]:
        out = []
        before = lead
        label: Sequence[str] = ()  # the terms of the paragraph's label, before its first sentence
        for order, (sentence, ordered, follows) in enumerate(split):  # terms: features, complement
            if labels and _is_label(sentence):
                # 「Typhoons.」 leading a paragraph names what it is about and says nothing alone: its
                # words count as the sentence it heads' own, and it is not quoted (a label quoted
                # with it only took the room of another sentence).
                label, before = ordered, frozenset(ordered)
                continue
            ordered, label = [*label, *ordered], ()
            terms = frozenset(ordered)
            carried = before if follows else frozenset()
            x = self._features(
                query, sentence, terms, context, order, weight, kinds, meaning, carried, quantities
            )
            before = terms
            # A sentence sharing nothing with the question is kept only as a possible follower.
            score = max(0.0, sum(w * v for w, v in zip(self._weights, x, strict=True))) if x else 0.0
            # A quoted list item loses its marker: "- " or "1. " leading an answer renders as a list.
            marker = LIST_ITEM.match(sentence)
            text = sentence[marker.end() :].strip() if marker else sentence
            # A table row is said as a sentence of its own header and cells (a run of cells reads as
            # a pasted fragment), and an inline section label 「【返却】」 is not quoted ahead of the
            # fact: both before the budget is counted and a long one is cut.
            row = is_table_row(sentence)
            text = row_as_sentence(text) if row else _SECTION_LABEL.sub("", text)
            out.append(
                _Candidate(
                    text or sentence,
                    source,
                    order,
                    score,
                    features=x,
                    item=bool(marker) or row,
                    row=row,
                    terms=terms,
                    pairs=term_pairs(ordered),
                    kinds=kinds - {"number"},
                )
            )
        return out

    def _features(
        self,
        query: WeightedQuery,
        sentence: str,
        terms: frozenset[str],
        context: frozenset[str],
        order: int,
        weight: float,
        kinds: frozenset[str],
        meaning: dict[str, float] | None,
        carried: frozenset[str] = frozenset(),
        quantities: tuple[Quantity, ...] = (),
    ) -> list[float] | None:
        """The sentence's features (SENTENCE_WEIGHTS), or None when it shares nothing with the
        question, in words or in meaning."""
        own = query.coverage(terms)
        framed = query.coverage(terms | context)  # the title counts: 「天治」 is rarely repeated
        # A sentence going on from the one before it is about what that one named: 「会社負担の
        # 上限は¥35,000」 after 「35歳以上は人間ドックを受診できる」 answers 「人間ドックの補助は？」.
        follows = query.coverage(terms | context | carried) if carried else framed
        close = (meaning or {}).get(sentence)
        if follows <= 0 and (close is None or close <= 0):
            return None
        number = 1.0 if "number" in kinds and has_number(sentence) else 0.0
        kind = kind_signal(kinds - {"number"}, [sentence])
        bound = bound_fit(quantities, sentence)
        return [own, framed, weight, float(order), close or 0.0, number, kind, follows, bound]

    async def sentence_rows(
        self, question: str, chunks: Sequence[GradedChunk]
    ) -> list[tuple[str, list[float]]]:
        """Each candidate sentence of the chunks with its features, as generate() scores them
        (tools/fit/fit_composer.py fits SENTENCE_WEIGHTS on these)."""
        query = self._query(question)
        _, candidates = self._candidates(query, question, chunks, [], await self._meaning(question, chunks))
        return [(c.text, c.features) for c in candidates if c.features is not None]

    def _choose(
        self,
        query: WeightedQuery,
        candidates: list[_Candidate],
        sources: list[_Source],
        lead_in: bool,
        max_chars: int,
        lead: _Candidate | None = None,
        reserved: set[tuple[int, int]] | frozenset[tuple[int, int]] = frozenset(),
        focus: WeightedQuery | None = None,  # a follow-up's own words: what an extra must add to
    ) -> list[_Candidate]:
        """The best sentence, the one after it (answers often follow the sentence that matches the
        question), then the next best sentences (at most MAX_RUNNERS_UP), as long as the answer,
        citation markers and source titles included, stays within the budget. A sentence too long
        for what is left is cut down to the clauses around its question terms."""
        if not candidates:
            return []
        best = lead if lead is not None else max(candidates, key=lambda c: c.score)
        # Sentences `reserved` for other parts of the question are not extras here.
        candidates = [c for c in candidates if c is best or (c.source, c.order) not in reserved]
        ranked = sorted(candidates, key=lambda c: -c.score)
        if best.score <= 0:
            return []
        draft = _Draft(sources, lead_in, max_chars)
        room = draft.room_for(best)
        if not best.whole:  # a snippet (at most WHOLE_SNIPPET_MAX) is quoted whole or not at all
            best.text = self._compress(
                query, best.text, max(room, MIN_EXCERPT), _holds_asked_number(best), best.kinds
            )
        draft.take(best, room)
        following = [c for c in candidates if c.source == best.source and c.order == best.order + 1]
        items = _items(best, candidates, draft.budget)
        if items:
            # "…次のいずれかに該当する場合に限り認められます。" says nothing without its list.
            return [best, *_listed(items)]
        runner_up = [c for c in ranked if c is not best and c.score > 0 and c.score >= 0.5 * best.score]
        # A sentence holding question words the best one lacks comes first: 「内線と受付時間は？」
        # is answered by 「内線2100」 and 「受付時間：平日9:00〜18:30」, not by two about the extension.
        complement = self._complement(focus or query, best, candidates)
        self._add_extras(query, draft, [*complement, *following[:1]], runner_up, focus)
        _bring_lists(draft, candidates)
        return draft.chosen

    def _add_extras(
        self,
        query: WeightedQuery,
        draft: _Draft,
        picks: list[_Candidate],
        runner_up: list[_Candidate],
        focus: WeightedQuery | None,
    ) -> None:
        """The `picks` (the complement, the sentence after the best), then the runners-up, each as it
        fits in the room left (cut down when too long), until MAX_SENTENCES or MAX_RUNNERS_UP."""
        runners = 0
        # The runners-up are taken in turn by score, but one adding question words the answer so far
        # lacks before one adding none (maximal marginal relevance, by words): 「内線と受付時間は？」
        # with 「内線2100」 quoted already is given 「受付時間：平日9:00〜18:30」, not another
        # passage's 「内線：3150（平日10:00〜17:00）」 scoring 0.1 higher.
        ask = focus or query
        queued = list(picks)
        # A follow-up's extra rows share its own words: 「夜勤は？」 after 「早番って何時から？」 is not
        # given the 早番 row again because there is room for it (a row is about its own case; a
        # sentence may answer in other words: "can they make it longer?" -> "may be extended").
        waiting = [
            c for c in runner_up if c not in picks and not (focus and c.row and focus.coverage(c.terms) <= 0)
        ]
        while (cand := _next_extra(queued, waiting, ask, draft.chosen)) is not None:
            if cand in draft.chosen:
                continue
            room = draft.room_for(cand)
            if len(cand.text) > room:
                if room < MIN_EXCERPT or cand.whole:
                    continue
                cand.text = self._compress(query, cand.text, room, _holds_asked_number(cand), cand.kinds)
                if len(cand.text) > room:
                    continue
            draft.take(cand, room)
            runners += cand not in picks
            if len(draft.chosen) == MAX_SENTENCES or runners == MAX_RUNNERS_UP:
                break

    def _complement(
        self, query: WeightedQuery, best: _Candidate, candidates: list[_Candidate]
    ) -> list[_Candidate]:
        """The sentence adding most of the question's information that the best one lacks, when it
        adds at least MIN_GAIN of it (none otherwise). Between sentences adding the same words, the
        one holding the kind of fact asked for, then the one adding the question's phrases:
        「受付時間：平日9:00〜」 for 「内線と受付時間は？」 when the best one's 「1時間以内」 already
        holds 時間, not 「端末は受付から5営業日以内に…」. Phrases are read in the question's own
        language only, so they come after the kind: a translated passage holds no pair of them."""
        adds = _additions(query, [best])
        gains = [(*adds(c), c) for c in candidates if c is not best and c.score > 0 and not c.whole]
        gain, _, _, cand = max(gains, key=lambda g: (*g[:3], g[3].score), default=(0.0, 0.0, 0.0, best))
        return [cand] if gain >= MIN_GAIN else []

    def _compress(
        self,
        query: WeightedQuery,
        text: str,
        limit: int,
        keep_number: bool = False,
        kinds: frozenset[str] = frozenset(),
    ) -> str:
        """_cut, unless the cut drops the fact of the asked kind the sentence holds ("…in a month
        recei…" for "do we get any money for working from home?", the amount after the cut): then
        the window of the sentence around that fact."""
        cut = self._cut(query, text, limit, keep_number)
        if cut == text or not kinds or kind_signal(kinds, [cut]) > 0:
            return cut
        span = kind_span(text, kinds)
        if span is None or span[1] - span[0] + 2 > limit:
            return cut
        return _window(text, span, limit)

    def _cut(self, query: WeightedQuery, text: str, limit: int, keep_number: bool = False) -> str:
        """A long sentence cut down to the run of clauses around the one holding most question
        terms (answers sit next to the words the question repeats), with … marking the cuts. With
        keep_number (the question asks for a number and the sentence holds one), the run is
        anchored on the number nearest those words when they and it do not fit together: the cut
        must not keep 「審査期間が」 and drop 「さらに3営業日延びます」."""
        if len(text) <= limit:
            return text
        clauses = [c for c in _CLAUSE.split(text) if c.strip()]
        if len(clauses) < 2:
            return _trim(text, limit)
        cover = [query.coverage(frozenset(self._index.terms(c))) for c in clauses]
        anchor = max(range(len(clauses)), key=lambda i: (cover[i], -i))
        if cover[anchor] <= 0:
            return _trim(text, limit)
        excerpt = _grow(clauses, anchor, limit, right_first=True)
        numbered = [i for i, c in enumerate(clauses) if has_number(c)]
        if keep_number and numbered and (excerpt is None or not has_number(excerpt)):
            # From the number, grow towards the question's words first: they say what it is.
            nearest = min(numbered, key=lambda i: (abs(i - anchor), i))
            excerpt = _grow(clauses, nearest, limit, right_first=nearest < anchor)
        return excerpt if excerpt is not None else _trim(text, limit)


def _opening(ask: AnswerRequest, parts: list[str]) -> str:
    """What the answer says first when the documents lack what is asked ("" when they may hold it).

    Passages on the topic, none holding a fact of the asked kind (no amount anywhere for "how
    much?"): the answer says so first, then quotes the nearest passage as that, not as an
    answer. One-part questions asking for the value itself only: 「低温作業手当はつく？」 asks
    whether, and is answered by the rule that grants it, amount or not.
    A follow-up by its own words: "does that apply to the finance section too?" after "how much
    is…?" asks whether, not how much. A count is of anything here ("30 to 50 thousand
    inhabitants" for "how many people"): the statement is for passages holding no number at all."""
    asked = _kinds(ask.question if ask.latest is None else ask.latest)
    kinds = frozenset(k.split(":")[0] for k in asked - {"number"})
    valued = "number" in asked or kinds <= {"phone", "email"}
    kind_lacking = (
        len(parts) == 1
        and valued
        and bool(ask.chunks)
        and kind_signal(kinds, [g.chunk.text for g in ask.chunks]) < 0
    )
    # The engine's word: on topic, and no passage answers (a reading grader's judgement).
    return absence(kinds, ask.language) if ask.lacking or kind_lacking else ""


def _answer(
    chosen: list[_Candidate],
    sources: list[_Source],
    language: Literal["ja", "en"],
    lead_in: bool,
    opening: str,
) -> GeneratedAnswer:
    """The chosen sentences as the answer's text, grouped by cited source, with the citations."""
    numbers, count = _numbers(chosen, sources)
    # Reading order: by citation number, then by passage and position inside it.
    # A table row or list item leading the answer stays first in its passage: rows stand alone, and
    # 「熊本工場だと何月？」 is answered by the 熊本工場 row, not by the 浜松工場 row above it.
    lead = chosen[0] if chosen[0].item and not chosen[0].listed else None
    ordered = sorted(chosen, key=lambda c: (numbers[c.source], c.source, -1 if c is lead else c.order))
    groups = [[c for c in ordered if numbers[c.source] == n] for n in range(1, count + 1)]
    named: set[str] = set()
    pieces = [_piece(group, n, sources, language, lead_in, named) for n, group in enumerate(groups, 1)]
    citations = [
        sources[group[0].source].citation.model_copy(update={"number": n})
        for n, group in enumerate(groups, 1)
    ]
    text = _joined(pieces)
    if opening:
        label = WEB_SAYS if sources[ordered[0].source].citation.kind == "web" else NEAREST
        return GeneratedAnswer(text=f"{opening}{label[language]}{text}", citations=citations, absent=True)
    return GeneratedAnswer(text=text, citations=citations)


def _numbers(chosen: list[_Candidate], sources: list[_Source]) -> tuple[dict[int, int], int]:
    """Each chosen sentence's source's citation number, and how many numbers there are. One number
    per cited file (or web page): two passages of one file are one source to the reader. Best
    sentence first: its file is [1]."""
    numbers: dict[int, int] = {}
    by_key: dict[str, int] = {}
    for cand in chosen:
        key = _source_key(sources[cand.source].citation)
        numbers[cand.source] = by_key.setdefault(key, len(by_key) + 1)
    return numbers, len(by_key)


def _piece(
    group: list[_Candidate],
    number: int,
    sources: list[_Source],
    language: Literal["ja", "en"],
    lead_in: bool,
    named: set[str],
) -> tuple[str, bool]:
    """One source's quoted text with its marker, and whether it ends in a list."""
    texts = [c.text for c in group]
    citation = sources[group[0].source].citation
    subject = _subject(citation, texts, named) if lead_in else ""
    # The marker once, after the last sentence of the source: "A. B. [1]", not "A. [1]B. [1]".
    # List items after the first sentence are shown as a list, on lines of their own.
    body = texts[0]
    for before, cand in pairwise(group):
        # A list's items on lines of their own, and what follows a list on a new line.
        glue = "\n- " if cand.listed else ("\n" if before.listed else _glue(body))
        body += glue + cand.text
    # Quoted across languages, the answer says so: the reader may search the source in its own.
    quoted = detect_language(body)
    note = ""
    if citation.kind == "document" and quoted != language:
        note = QUOTED_FROM[quoted][language]
    return f"{note}{body}{subject} [{number}]", group[-1].listed


def _joined(pieces: list[tuple[str, bool]]) -> str:
    """The sources' pieces as one text: after a list, the next on a line of its own."""
    text = pieces[0][0]
    for (piece, _), (_, list_before) in zip(pieces[1:], pieces, strict=False):
        text += ("\n" if list_before else _glue(text)) + piece
    return text


@dataclass
class _Draft:
    """An answer's sentences in the choosing, and the room left for more."""

    sources: list[_Source]
    lead_in: bool  # each source's title leads its first quoted sentence (Japanese)
    budget: int  # characters left
    chosen: list[_Candidate] = field(default_factory=list)
    titled: set[int] = field(default_factory=set)  # sources whose title is counted already

    def room_for(self, cand: _Candidate) -> int:
        """The room left for the sentence's text: less " [n]" and the joiner, and the source's
        lead-in once."""
        shown = self.lead_in and cand.source not in self.titled
        lead = len(_display_title(self.sources[cand.source].citation)) + 2 if shown else 0
        return self.budget - (_MARKER_COST + lead)

    def take(self, cand: _Candidate, room: int) -> None:
        self.chosen.append(cand)
        self.budget = room - len(cand.text)
        self.titled.add(cand.source)


def _next_extra(
    queued: list[_Candidate], waiting: list[_Candidate], ask: WeightedQuery, chosen: list[_Candidate]
) -> _Candidate | None:
    """The next sentence to try adding: the queued ones in order, then the waiting one adding most."""
    if queued:
        return queued.pop(0)
    if not waiting:
        return None
    # As the complement: between runners-up adding words, the one holding the asked kind of
    # fact, then the one adding the question's phrases, then the higher scored.
    adds = _additions(ask, chosen)

    def key(c: _Candidate) -> tuple[bool, float, bool, float]:
        words, kind, phrases = adds(c)
        return words > 0, kind, phrases > 0, c.score

    cand = max(waiting, key=key)
    waiting.remove(cand)
    return cand


def _bring_lists(draft: _Draft, candidates: list[_Candidate]) -> None:
    """An extra that announces a list brings it, in the room left (「次の休暇と旅行券を付与する。」
    holds nothing itself), unless another chosen sentence, not one of its items, follows it in
    its passage. Items chosen already are part of it: the lead 「世帯主ではない; 月額: ¥2,700」
    and the extra 「毎月次の住宅手当を支給する。」 bring the table's other rows."""
    for cand in draft.chosen[1:]:
        after = [c for c in draft.chosen if c.source == cand.source and c.order > cand.order]
        if all(c.item for c in after):
            paid = sum(len(c.text) + 3 for c in after)
            items = _items(cand, candidates, draft.budget + paid)
            if all(c in items for c in after):  # else the room left does not hold them all
                draft.chosen += [c for c in _listed(items) if c not in draft.chosen]
                draft.budget -= sum(len(c.text) + 3 for c in items) - paid


def _additions(
    query: WeightedQuery, quoted: Sequence[_Candidate]
) -> Callable[[_Candidate], tuple[float, float, float]]:
    """What a sentence would add to the `quoted` ones: the share of the question's information they
    lack, its answer-kind signal, and the share of the question's phrases they lack (what the
    complement and the runners-up are chosen by). The quoted sentences' own shares are read once."""
    terms: frozenset[str] = frozenset().union(*(c.terms for c in quoted))
    pairs = [c.pairs for c in quoted]
    have, phrased = query.coverage(terms), query.phrase_coverage(*pairs)

    def adds(cand: _Candidate) -> tuple[float, float, float]:
        return (
            query.coverage(terms | cand.terms) - have,
            cand.features[KIND] if cand.features else 0.0,
            query.phrase_coverage(*pairs, cand.pairs) - phrased,
        )

    return adds


def _grow(clauses: list[str], anchor: int, limit: int, right_first: bool) -> str | None:
    """The run of clauses around `anchor` that fits in `limit` with an ellipsis at each cut (None
    when the anchor alone does not fit), grown clause by clause, to the right first or to the left."""
    if len(clauses[anchor]) + 2 > limit:
        return None
    start = end = anchor
    size = len(clauses[anchor]) + 2  # room for an ellipsis at each end
    while True:
        right = end + 1 < len(clauses) and size + len(clauses[end + 1]) <= limit
        left = start > 0 and size + len(clauses[start - 1]) <= limit
        if right and (right_first or not left):
            end += 1
            size += len(clauses[end])
        elif left:
            start -= 1
            size += len(clauses[start])
        else:
            break
    excerpt = "".join(clauses[start : end + 1]).strip()
    return ("…" if start > 0 else "") + excerpt + ("…" if end + 1 < len(clauses) else "")


def _framed(query: WeightedQuery, own: frozenset[str], context: float) -> WeightedQuery:
    """The query with the terms not in `own` weighing `context` times as much."""
    weights = {t: w if t in own else w * context for t, w in query.weights.items()}
    return replace(query, weights=weights, total=sum(weights.values()))


def _is_label(sentence: str) -> bool:
    return len(sentence.split()) <= 5 and bool(_LABEL.match(sentence))


def _listed(items: list[_Candidate]) -> list[_Candidate]:
    """The items, marked as quoted under the sentence announcing them (shown as a list)."""
    for cand in items:
        cand.listed = True
    return items


def _items(intro: _Candidate, candidates: list[_Candidate], budget: int) -> list[_Candidate]:
    """The items of the list `intro` announces (the list items right after it, when it reads like
    「次の…」 / "the following" / a closing colon), whole, as many as fit in `budget`."""
    if not _INTRODUCES_LIST.search(intro.text):
        return []
    after = sorted(
        (c for c in candidates if c.source == intro.source and c.order > intro.order), key=lambda c: c.order
    )
    items: list[_Candidate] = []
    for i, cand in enumerate(after[:_MAX_ITEMS]):
        if not cand.item or cand.order != intro.order + 1 + i or len(cand.text) + 3 > budget:
            break
        items.append(cand)
        budget -= len(cand.text) + 3  # "\n- "
    return items


def _holds_asked_number(cand: _Candidate) -> bool:
    """The question asks for a number and this sentence holds one (its `number` feature)."""
    return bool(cand.features) and cand.features is not None and cand.features[NUMBER] > 0


# Sentences per part considered for its lead when parts compete for one sentence.
_LEAD_CHOICES = 5


def _assign_leads(per_part: list[list[_Candidate]]) -> list[_Candidate | None]:
    """The sentence each part of a question leads with: the distinct sentences that together score
    best. Each part's own best alone often lands on one sentence for two parts ("the service desk
    extension, and the out-of-hours number?" -> the out-of-hours line twice), and the first part's
    fact then goes missing. None for a part with nothing to say, and for a one-part question (its
    best sentence, as _choose picks it)."""
    if len(per_part) < 2:
        return [None] * len(per_part)
    options = [
        sorted((c for c in candidates if c.score > 0), key=lambda c: -c.score)[:_LEAD_CHOICES]
        for candidates in per_part
    ]
    best: tuple[float, list[_Candidate | None]] = (-1.0, [None] * len(per_part))

    def walk(
        i: int, taken: frozenset[tuple[int, int]], total: float, picked: list[_Candidate | None]
    ) -> None:
        nonlocal best
        if i == len(options):
            if total > best[0]:
                best = (total, list(picked))
            return
        walk(i + 1, taken, total, [*picked, None])  # only wins when every option is taken
        for cand in options[i]:
            key = (cand.source, cand.order)
            if key not in taken:
                walk(i + 1, taken | {key}, total + cand.score, [*picked, cand])

    walk(0, frozenset(), 0.0, [])
    return best[1]


# A page title's trailing site name: "RKBラジオ - Wikipedia", "Pricing | Contoso".
_SITE_SUFFIX = re.compile(r"\s+[-|–—]\s+[^-|–—]{1,40}$")


def _display_title(citation: Citation) -> str:
    """The title a passage from this source may be led with ("" when none fits)."""
    title = citation.title.strip()
    if citation.kind == "web":
        title = _SITE_SUFFIX.sub("", title)
    return title if len(title) <= 60 else ""


def _subject(citation: Citation, texts: list[str], named: set[str]) -> str:
    """The source's title in brackets, put after the source's quoted sentences, when they do not
    name it themselves and the answer has not named it yet.

    Japanese documents state their subject once, in the title, and then leave it out
    (「ライネ川沿いに位置し…」): without the title, a quoted sentence does not say what it is about.
    After the quote, not before it: the answer leads with the fact, not with a document's name
    (「【休暇制度ガイド】全社一斉の…」 read as a pasted fragment).
    """
    title = _display_title(citation)
    key = unicodedata.normalize("NFKC", title).lower()
    if not title or key in named:
        return ""
    named.add(key)
    if key in unicodedata.normalize("NFKC", "".join(texts)).lower():
        return ""
    return f"（{title}）"


def _glue(before: str) -> str:
    """Japanese sentences join without a space, unless the first has no closing punctuation (a list
    item, a "label: value" line), which would run into the next: 「…example貸与PC…」; English
    sentences, quoted in a Japanese answer too, with one."""
    # After a closed Japanese sentence nothing; after anything else (an English sentence, a Japanese
    # list item without 。) a space, whatever the answer's language.
    return "" if before.rstrip()[-1:] in ("。", "！", "？", "」", "）", "』") else " "


def _source_key(citation: Citation) -> str:
    return f"file:{citation.file}" if citation.kind == "document" else f"web:{citation.url or citation.title}"


def _window(text: str, span: tuple[int, int], limit: int) -> str:
    """The text around span, at most limit characters with the … marking each cut, starting at a word
    where the text has spaces."""
    room = limit - 2  # the marks
    start = max(0, min(span[0] - (room - (span[1] - span[0])) // 2, len(text) - room))
    if start > 0 and " " in text[start : span[0]]:
        start = text.index(" ", start, span[0]) + 1
    end = min(len(text), start + room)
    if end < len(text) and " " in text[span[1] : end]:
        end = text.rindex(" ", span[1], end)
    return ("…" if start > 0 else "") + text[start:end].strip() + ("…" if end < len(text) else "")


def _trim(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    return text[: max_chars - 1].rstrip() + "…"


def _kinds(question: str) -> frozenset[str]:
    """The kinds of fact the question asks for, and "number" when it asks for any number."""
    kinds = asked_kinds(question)
    return kinds | {"number"} if asks_for_number(question) else kinds
