"""Keyword rewrite without a language model: the question's content words, Japanese keyword style."""

from __future__ import annotations

from collections.abc import Sequence

from crag.core.models import Turn
from crag.text.followup import in_context, leans_on_previous, subject_words, with_previous
from crag.text.tokenize import TermExtractor


class LocalKeywordRewriter:
    name = "local-keywords"

    def __init__(self, extractor: TermExtractor) -> None:
        self._extractor = extractor

    async def rewrite(self, question: str, history: Sequence[Turn]) -> str:
        keywords, subject = self._words(question)
        # A follow-up that leans on the previous question borrows that question's keywords; a
        # self-contained one does not (they would find the previous answer again).
        if leans_on_previous(question, history, len(keywords), subject):
            previous = self._extractor.keywords(self.standalone(history[-1].question, history[:-1]))
            keywords = list(dict.fromkeys([*previous, *keywords]))
        return " ".join(keywords) if keywords else question.strip()

    def standalone(self, question: str, history: Sequence[Turn]) -> str:
        if not history:  # a first question stands alone: no tokenizing on that path
            return question
        keywords, subject = self._words(question)
        return in_context(question, history, len(keywords), subject)

    def may_lean(self, question: str, history: Sequence[Turn]) -> bool:
        # One word at most that could name a subject: 「返事」, "delivery", "anything before driving?".
        return bool(history) and self._words(question)[1] <= 1

    def _words(self, question: str) -> tuple[list[str], int]:
        """The question's keywords, and how many of its terms could name its subject, from one
        analysis of it."""
        words = self._extractor.analyze(question)
        keywords = list(dict.fromkeys(w.keyword for w in words))
        return keywords, subject_words(list(dict.fromkeys(w.term for w in words)))

    def with_previous(self, question: str, history: Sequence[Turn]) -> str:
        return with_previous(question, history)

    async def rewrite_for_web(self, question: str, history: Sequence[Turn]) -> str:
        return await self.rewrite(question, history)

    async def rewrite_missing(
        self, question: str, history: Sequence[Turn], missing: Sequence[str], used: Sequence[str]
    ) -> list[str]:
        """One search per missing part, in the part's own words (a part's keywords find the passage
        the whole question's keywords drowned). A single-part question has nothing new to try."""
        queries: list[str] = []
        for part in missing:
            if part == question:
                continue
            query = await self.rewrite(part, history)
            if query not in used and query not in queries:
                queries.append(query)
        return queries
