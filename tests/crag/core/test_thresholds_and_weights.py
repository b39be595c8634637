"""One Thresholds value from the settings to the card, and fitted weights as named records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cards.answer_card import answer_card
from crag.config.engine_settings import CragSettings
from crag.core import weights
from crag.core.models import Branch, Chunk, Citation, CragResult, GradedChunk, Thresholds
from crag.runtime.factory import build_engine, open_local_index
from crag.stages.generate.extractive import SENTENCE_FEATURES, SENTENCE_WEIGHTS
from crag.stages.grade import local
from tests.paths import ROOT


def _result(score: float, thresholds: Thresholds) -> CragResult:
    chunk = Chunk(
        id="c1", file="leave.md", title="Leave", text="Up to 20 days carry over.", headers=["Leave"]
    )
    return CragResult(
        question="How many days carry over?",
        language="en",
        branch=Branch.AMBIGUOUS,
        graded=[GradedChunk(chunk=chunk, score=score, kept=True)],
        answer="Up to 20 days carry over. [1]",
        citations=[Citation(number=1, kind="document", title="Leave", file="leave.md", url="")],
        thresholds=thresholds,
    )


def test_the_card_labels_a_match_by_the_thresholds_the_turn_was_routed_with() -> None:
    default = json.dumps(answer_card(_result(0.75, Thresholds()), "en"), ensure_ascii=False)
    lowered = json.dumps(
        answer_card(_result(0.75, Thresholds(upper=0.7, lower=0.3)), "en"), ensure_ascii=False
    )
    assert "partial match" in default and "strong match" not in default
    assert "strong match" in lowered and "partial match" not in lowered


async def test_the_settings_thresholds_reach_the_engine_and_its_results(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "leave.md").write_text("# Leave\n\nUp to 20 days of annual leave carry over.\n", "utf-8")
    settings = CragSettings(
        CRAG_UPPER_THRESHOLD=0.7,
        CRAG_LOWER_THRESHOLD=0.3,
        CRAG_DOCS_DIR=str(docs),
        CRAG_INDEX_DIR=str(tmp_path / "index"),
        CRAG_EMBEDDINGS="off",
        CRAG_WEB="off",
    )
    assert settings.thresholds == Thresholds(upper=0.7, lower=0.3)
    index, _ = open_local_index(settings)
    engine = build_engine(settings, index=index)
    assert engine.config.thresholds == Thresholds(upper=0.7, lower=0.3)
    result = await engine.run("How many days of leave carry over?")
    assert result.thresholds == Thresholds(upper=0.7, lower=0.3)


def test_thresholds_refuse_a_lower_above_the_upper() -> None:
    with pytest.raises(ValueError, match="must not exceed"):
        Thresholds(upper=0.3, lower=0.5)


def test_shipped_weights_are_loaded_by_feature_name() -> None:
    assert len(SENTENCE_WEIGHTS) == len(SENTENCE_FEATURES)
    sentence = weights.load(ROOT / "crag/stages/generate/weights.toml", "sentence", SENTENCE_FEATURES)
    assert sentence["cosine"] == SENTENCE_WEIGHTS[SENTENCE_FEATURES.index("cosine")]
    assert sentence.fitted  # where and how it was fitted travels with it
    assert local.SEMANTIC is not None and len(local.SEMANTIC.weights) == len(local.SEMANTIC_FEATURES)


def test_weights_in_another_order_are_reordered_to_the_codes(tmp_path: Path) -> None:
    path = tmp_path / "w.toml"
    path.write_text("[m]\nbias = 1.5\n[m.weights]\nb = 2.0\na = 1.0\n", "utf-8")
    fitted = weights.load(path, "m", ("a", "b"))
    assert fitted.weights == (1.0, 2.0) and fitted.params == {"bias": 1.5}


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ("[m.weights]\na = 1.0\n", "missing weights ['b']"),
        ("[m.weights]\na = 1.0\nb = 1.0\nc = 1.0\n", "unknown features ['c']"),
        ("[other.weights]\na = 1.0\n", "no [m.weights] table"),
    ],
)
def test_weights_that_do_not_name_the_codes_features_are_refused(
    tmp_path: Path, table: str, problem: str
) -> None:
    path = tmp_path / "w.toml"
    path.write_text(table, "utf-8")
    with pytest.raises(weights.WeightsMismatch) as err:
        weights.load(path, "m", ("a", "b"))
    assert problem in str(err.value)
