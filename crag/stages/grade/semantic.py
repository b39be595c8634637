"""Meaning-level evidence for the local grader, from the local index's embeddings.

Lexical evidence cannot tell a passage that mentions the question's words from one that answers it,
and it finds nothing across languages. Embeddings of the question, the chunk and each of the chunk's
sentences add that: how close the chunk is in meaning, and how close its best sentence is (an answer
usually sits in one sentence, and a long chunk's own vector blurs it).

e5's cosines are compressed (unrelated pairs about 0.75, good matches 0.85-0.89), so they are
centred and scaled before the logistic model sees them. Question and chunk in different languages
are flagged: lexical features are near zero there by construction, and the model needs to know that
this is why rather than because the chunk is unrelated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

# cos -> SCALE * (cos - CENTRE): about -0.5 for unrelated pairs, +0.5..0.9 for good matches.
CENTRE = 0.8
SCALE = 10.0


class VectorSource(Protocol):
    """The local index's vectors (crag.retrieval.search.local_index.LocalIndex)."""

    @property
    def vectors_ready(self) -> bool: ...

    def chunk_vector(self, chunk_id: str) -> np.ndarray | None: ...

    def sentence_vectors(self, chunk_id: str) -> tuple[list[str], np.ndarray] | None: ...

    def standing(self, vector: np.ndarray, chunk_id: str) -> tuple[float, float] | None: ...

    async def query_vector(self, text: str) -> np.ndarray | None: ...


@dataclass(frozen=True)
class SemanticEvidence:
    chunk: float  # centred cosine of question and chunk
    sentence: float  # centred cosine of question and the chunk's closest sentence
    cross_language: bool  # question and chunk in different languages
    best_sentence: str = ""
    # The same two cosines as z-scores among the index's chunks in the chunk's language, scaled down
    # to the other features' range: how much this chunk stands out, which does not depend on
    # whether the question is in the chunk's language.
    chunk_standing: float = 0.0
    sentence_standing: float = 0.0

    # The names of vector()'s entries, in order.
    NAMES = (
        "chunk_cosine",
        "sentence_cosine",
        "cross_language",
        "cross_language_x_sentence_cosine",
        "chunk_standing",
        "sentence_standing",
    )

    def vector(self) -> list[float]:
        cross = 1.0 if self.cross_language else 0.0
        return [
            self.chunk,
            self.sentence,
            cross,
            cross * self.sentence,
            self.chunk_standing,
            self.sentence_standing,
        ]


def centred(cos: float) -> float:
    return max(-3.0, min(3.0, SCALE * (cos - CENTRE)))


def evidence(
    question_vector: np.ndarray,
    question_language: str,
    chunk_id: str,
    chunk_language: str,
    source: VectorSource,
) -> SemanticEvidence | None:
    """The chunk's semantic evidence, or None when its vectors are not (yet) there."""
    chunk_vector = source.chunk_vector(chunk_id)
    sentences = source.sentence_vectors(chunk_id)
    if chunk_vector is None:
        return None
    chunk_cos = float(np.dot(chunk_vector.astype(np.float32), question_vector))
    best_cos, best_text = chunk_cos, ""
    if sentences is not None and len(sentences[0]):
        texts, matrix = sentences
        cosines = matrix.astype(np.float32) @ question_vector
        i = int(np.argmax(cosines))
        best_cos, best_text = float(cosines[i]), texts[i]
    standing = source.standing(question_vector, chunk_id) or (0.0, 0.0)
    return SemanticEvidence(
        chunk=centred(chunk_cos),
        sentence=centred(best_cos),
        cross_language=chunk_language != question_language,
        best_sentence=best_text,
        chunk_standing=standing_scaled(standing[0]),
        sentence_standing=standing_scaled(standing[1]),
    )


def standing_scaled(z: float) -> float:
    """A z-score brought to about -1..2 (the best passages of a question stand 3-5 deviations out)."""
    return max(-1.5, min(2.5, z / 2.0))
