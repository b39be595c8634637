"""Each retrieved chunk's sentences and their terms, tokenized once and shared by the grader and the
composer.

Tokenizing (Sudachi for Japanese) is the costliest step of a local turn, and both the grader and
the extractive composer read every retrieved chunk sentence by sentence: without a shared memo each
chunk was tokenized twice per turn. Chunks recur across turns (popular sections), so the memo is an
LRU keyed by chunk id; an index rebuild builds a new engine, and with it a new memo.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from crag.core.models import Chunk
from crag.text.lang import passage_language
from crag.text.sentences import split_blocks
from crag.text.stats import TermStats


@dataclass(frozen=True)
class Sentence:
    text: str
    terms: tuple[str, ...]  # in order: the grader reads neighbouring pairs
    follows: bool = False  # goes on from the sentence before it (same paragraph, list item)


@dataclass(frozen=True)
class ChunkTerms:
    header_text: str  # title and headers, each once
    header_terms: tuple[str, ...]
    sentences: tuple[Sentence, ...]  # the chunk's body
    language: str  # of the framed text (headers and body): "ja" or "en"
    lead_terms: tuple[str, ...] = ()  # of the sentence the body's first one goes on from (Chunk.lead)


class ChunkTermsMemo:
    def __init__(self, stats: TermStats, size: int = 4096) -> None:
        self._stats = stats
        self._size = size
        self._memo: OrderedDict[str, ChunkTerms] = OrderedDict()

    def of(self, chunk: Chunk) -> ChunkTerms:
        found = self._memo.get(chunk.id)
        if found is not None:
            self._memo.move_to_end(chunk.id)
            return found
        terms = self._stats.terms
        header_text = " ".join(dict.fromkeys(chunk.headers))
        result = ChunkTerms(
            header_text=header_text,
            header_terms=tuple(terms(header_text)),
            sentences=tuple(
                # A chunk cut inside a paragraph starts with a sentence going on from its lead.
                Sentence(s, tuple(terms(s)), follows=i > 0 or (b == 0 and bool(chunk.lead)))
                for b, block in enumerate(split_blocks(chunk.text))
                for i, s in enumerate(block)
            ),
            lead_terms=tuple(terms(chunk.lead)) if chunk.lead else (),
            language=passage_language(chunk.framed_text),
        )
        self._memo[chunk.id] = result
        if len(self._memo) > self._size:
            self._memo.popitem(last=False)
        return result
