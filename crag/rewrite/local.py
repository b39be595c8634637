"""Keyword rewrite without a language model: the question's content words, Japanese keyword style."""

from __future__ import annotations

import re
from collections.abc import Sequence

from crag.models import Turn
from crag.text.tokenize import TermExtractor

# Words that point back at the previous turn ("それの料金は？", "and what about it?").
_ANAPHORA = re.compile(
    r"(それ|その|そこ|あれ|あの|これ|この|同じ|\b(it|its|that|those|they|them|this)\b)", re.I
)


class LocalKeywordRewriter:
    name = "local-keywords"

    def __init__(self, extractor: TermExtractor) -> None:
        self._extractor = extractor

    async def rewrite(self, question: str, history: Sequence[Turn]) -> str:
        keywords = self._extractor.keywords(question)
        # A follow-up that leans on the previous question borrows that question's keywords.
        if history and (len(keywords) < 2 or _ANAPHORA.search(question)):
            previous = self._extractor.keywords(history[-1].question)
            keywords = list(dict.fromkeys([*previous, *keywords]))
        return " ".join(keywords) if keywords else question.strip()

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
