"""An extractive answer composer: the best sentences of the kept knowledge, concise, with citations.

Without a generative model the most faithful answer is the document's own words: pick the sentence
holding most of the question's information, add a second one when it brings more of it and the
answer stays short, and cite where each came from.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from crag.messages import REFUSAL
from crag.models import Citation, GeneratedAnswer, GradedChunk, WebResult
from crag.protocols import TextSink
from crag.text.overlap import WeightedQuery, weighted_query
from crag.text.question import asks_for_number, has_number
from crag.text.sentences import split_sentences
from crag.text.stats import TermStats

# Search engines cut snippets at about 300-320 characters.
WHOLE_SNIPPET_MAX = 320


@dataclass
class _Candidate:
    text: str
    source: int  # index into the sources list
    order: int  # position inside its source, to keep reading order
    score: float


@dataclass
class _Source:
    citation: Citation
    weight: float  # the grade of the chunk (web results count as moderately relevant)


class ExtractiveComposer:
    name = "local-extractive"

    def __init__(self, index: TermStats, max_chars: int = 300) -> None:
        self._index = index
        self._max_chars = max_chars

    async def generate(
        self,
        question: str,
        language: Literal["ja", "en"],
        chunks: Sequence[GradedChunk],
        web: Sequence[WebResult],
        on_text: TextSink | None = None,
    ) -> GeneratedAnswer:
        query = weighted_query(self._index.words(question), self._index.idf)
        sources, candidates = self._candidates(query, question, chunks, web)
        chosen = self._choose(candidates)
        if not chosen:
            return GeneratedAnswer(text=REFUSAL[language], refused=True)
        numbers: dict[int, int] = {}
        for cand in chosen:  # best sentence first: its source is [1]
            numbers.setdefault(cand.source, len(numbers) + 1)
        # Reading order: by citation number, then by position inside the source.
        ordered = sorted(chosen, key=lambda c: (numbers[c.source], c.order))
        parts: list[str] = []
        named: set[str] = set()
        for src in sorted(numbers, key=numbers.__getitem__):
            texts = [c.text for c in ordered if c.source == src]
            subject = _subject(sources[src].citation, texts, language, named)
            parts.extend(
                f"{subject if i == 0 else ''}{text} [{numbers[src]}]" for i, text in enumerate(texts)
            )
        citations = [
            sources[src].citation.model_copy(update={"number": n})
            for src, n in sorted(numbers.items(), key=lambda kv: kv[1])
        ]
        joiner = "" if language == "ja" else " "
        return GeneratedAnswer(text=joiner.join(parts), citations=citations)

    def _candidates(
        self, query: WeightedQuery, question: str, chunks: Sequence[GradedChunk], web: Sequence[WebResult]
    ) -> tuple[list[_Source], list[_Candidate]]:
        sources: list[_Source] = []
        candidates: list[_Candidate] = []
        wants_number = asks_for_number(question)
        for g in chunks:
            c = g.chunk
            citation = Citation(
                number=0, kind="document", title=c.title, url=c.url, file=c.file, excerpt=c.text[:160]
            )
            sources.append(_Source(citation, g.score))
            context = frozenset(self._index.terms(" ".join(c.headers)))
            candidates.extend(
                self._sentences(query, c.text, context, len(sources) - 1, g.score, wants_number)
            )
        for w in web:
            citation = Citation(number=0, kind="web", title=w.title, url=w.url, excerpt=w.snippet[:160])
            sources.append(_Source(citation, 0.6))
            context = frozenset(self._index.terms(w.title))
            sentences = self._sentences(query, w.snippet, context, len(sources) - 1, 0.6, wants_number)
            if sentences and len(w.snippet) <= WHOLE_SNIPPET_MAX:
                # A snippet is already the search engine's excerpt around the match, and its answer
                # often sits in the sentence before or after the one that repeats the question:
                # quote it whole rather than cut it into sentences.
                best = max(c.score for c in sentences)
                candidates.append(_Candidate(w.snippet.strip(), len(sources) - 1, 0, best))
            else:
                candidates.extend(sentences)
        return sources, candidates

    def _sentences(
        self,
        query: WeightedQuery,
        text: str,
        context: frozenset[str],
        source: int,
        weight: float,
        wants_number: bool,
    ) -> list[_Candidate]:
        out = []
        for order, sentence in enumerate(split_sentences(text)):
            terms = frozenset(self._index.terms(sentence))
            own = query.coverage(terms)
            framed = query.coverage(terms | context)  # the title counts: 「天治」 is rarely repeated
            score = 0.0
            if framed > 0:
                score = 0.7 * own + 0.3 * framed + 0.1 * weight - 0.002 * order
                if wants_number and has_number(sentence):
                    score += 0.15
            # A sentence sharing nothing with the question is kept only as a possible follower.
            out.append(_Candidate(sentence, source, order, max(score, 0.0)))
        return out

    def _choose(self, candidates: list[_Candidate]) -> list[_Candidate]:
        """The best sentence, the one after it (answers often follow the sentence that matches the
        question), then the next best sentence, as long as the answer stays within the budget."""
        if not candidates:
            return []
        ranked = sorted(candidates, key=lambda c: -c.score)
        best = ranked[0]
        if best.score <= 0:
            return []
        best.text = _trim(best.text, self._max_chars)
        chosen = [best]
        budget = self._max_chars - len(best.text)
        following = [c for c in candidates if c.source == best.source and c.order == best.order + 1]
        runner_up = [c for c in ranked[1:] if c.score > 0 and c.score >= 0.5 * best.score]
        for cand in following[:1] + runner_up:
            if cand not in chosen and len(cand.text) + 5 <= budget:
                chosen.append(cand)
                budget -= len(cand.text) + 5
                if len(chosen) == 3 or cand in runner_up:
                    break
        return chosen


# A page title's trailing site name: "RKBラジオ - Wikipedia", "Pricing | Contoso".
_SITE_SUFFIX = re.compile(r"\s+[-|–—]\s+[^-|–—]{1,40}$")


def _subject(citation: Citation, texts: list[str], language: Literal["ja", "en"], named: set[str]) -> str:
    """The source's title as a lead-in, when the quoted sentences do not name it themselves and the
    answer has not named it yet.

    Documents state their subject once, in the title, and then leave it out ("Lies on the Leine
    and is a transport hub."): without the title, a quoted sentence does not say what it is about.
    """
    title = citation.title.strip()
    if citation.kind == "web":
        title = _SITE_SUFFIX.sub("", title)
    key = unicodedata.normalize("NFKC", title).lower()
    if not title or len(title) > 60 or key in named:
        return ""
    named.add(key)
    if key in unicodedata.normalize("NFKC", "".join(texts)).lower():
        return ""
    return f"【{title}】" if language == "ja" else f"{title} — "


def _trim(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    return text[: max_chars - 1].rstrip() + "…"
