"""The reading grader (crag/stages/grade/reading.py) grades what the relevance model reads, window by
window, and falls back to the feature grader when the model cannot run; the engine says "the
documents don't state it" when passages are on topic and none answers (crag/engine.py lacking)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from crag.config.engine_settings import CragSettings
from crag.core.models import Branch, Chunk
from crag.core.texts import says_absent
from crag.engine import CragEngine
from crag.runtime.factory import build_engine, open_local_index
from crag.stages.grade.local import LocalGrader
from crag.stages.grade.reading import (
    MAX_WINDOWS,
    READ_AT_MOST,
    UNREAD,
    WINDOW_CHARS,
    Anchors,
    ReadingGrader,
    pieces,
    windows,
)
from crag.stages.grade.relevance_model import SEPARATOR

DOCS = {
    "shokudo.md": "# 社員食堂の案内\n\n## 営業時間\n\n"
    "社員食堂は本社ビル3階にあり、平日の11時30分から14時まで営業しています。"
    "日替わり定食は450円で、社員証で支払えます。\n",
    "parking.txt": "Bicycle parking\n\nBicycle parking is in the basement, level B1. "
    "Register your bicycle with General Affairs to get a sticker.\n",
}


class FakeModel:
    """Reads "answers it" where the window holds the marked fact, for the question that asks it."""

    note = "a fake"

    def __init__(self, facts: dict[str, str]) -> None:
        self.facts = facts  # question -> the text a window must hold to answer it
        self.read: list[str] = []

    def logits(self, texts: Sequence[str]) -> np.ndarray:
        self.read.extend(texts)
        out = []
        for text in texts:
            question, _, window = text.partition(SEPARATOR)
            fact = self.facts.get(question)
            out.append(5.0 if fact is not None and fact in window else -5.0)
        return np.array(out, np.float32)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> CragSettings:
    root = tmp_path_factory.mktemp("reading")
    (root / "docs").mkdir()
    for name, text in DOCS.items():
        (root / "docs" / name).write_text(text, "utf-8")
    return CragSettings(
        CRAG_DOCS_DIR=str(root / "docs"), CRAG_INDEX_DIR=str(root / "index"), CRAG_EMBEDDINGS="off"
    )


def _engine(
    settings: CragSettings, model: object | None, load: Callable[[], object | None] | None = None
) -> tuple[CragEngine, ReadingGrader]:
    index, _ = open_local_index(settings)
    engine = build_engine(settings, index)
    assert index is not None
    grader = ReadingGrader(LocalGrader(index), load or (lambda: model), Anchors(upper=2.0, lower=0.0))  # type: ignore[arg-type]
    engine.grader = grader
    return engine, grader


def test_a_long_passage_is_read_in_windows_under_its_headers() -> None:
    text = "。".join(f"第{i}条の規定はこのとおりとする" for i in range(100)) + "。"
    cut = pieces(text)
    assert "".join(cut) == text and all(len(p) <= WINDOW_CHARS for p in cut) and len(cut) > MAX_WINDOWS
    chunk = Chunk(id="c", file="f.md", title="規程", headers=["規程", "第1章"], text=text, url="")
    read = windows(chunk)
    assert len(read) == MAX_WINDOWS and all(w.startswith("規程 > 第1章\n") for w in read)
    assert read[0].endswith(cut[0]) and read[1].endswith(cut[1])  # nothing shared: the first ones
    # The windows sharing most of the question's words are read, in the passage's order.
    tail = "駐輪場は地下1階にあり、利用には総務部への登録が必要です。"
    chunk = chunk.model_copy(update={"text": text + tail})
    asked = [w.split("\n", 1)[1] for w in windows(chunk, "駐輪場の登録ってどこでする？")]
    assert len(asked) == MAX_WINDOWS and tail in asked[-1] and asked[0] == pieces(chunk.text)[0]


async def test_the_grade_is_the_best_windows_and_keeps_the_rubric(corpus: CragSettings) -> None:
    question = "社員食堂の日替わり定食はいくら？"
    engine, grader = _engine(corpus, FakeModel({question: "450円"}))
    result = await engine.run(question)
    assert grader.name == "local-reader"
    assert result.branch is Branch.CORRECT and "450円" in result.answer
    assert result.cited_files == ["shokudo.md"]
    assert max(g.score for g in result.graded) > 0.8  # logit 5 over the upper anchor 2


async def test_on_topic_and_unanswered_says_the_documents_do_not_state_it(corpus: CragSettings) -> None:
    engine, _ = _engine(corpus, FakeModel({}))
    result = await engine.run("社員食堂の夕食営業は何時まで？")
    assert result.branch is Branch.INCORRECT
    assert says_absent(result.answer), result.answer
    assert result.answer.startswith("社内文書には、お尋ねの")
    assert "shokudo.md" in result.cited_files  # then the nearest passage, as that
    # Off the documents' topic: no such statement, the refusal (no web search here).
    off = await engine.run("Who won the 2022 FIFA World Cup final?")
    assert off.branch is Branch.INCORRECT and not says_absent(off.answer) and off.refused


async def test_without_the_model_the_feature_grader_grades_and_the_log_says_so(
    corpus: CragSettings, caplog: pytest.LogCaptureFixture
) -> None:
    from crag.stages.grade.relevance_model import RelevanceModel

    missing = corpus.index_dir / "no.weights"
    # As the factory wires it, with no weights file there.
    engine, grader = _engine(corpus, None, lambda: RelevanceModel.load(missing))
    caplog.set_level(logging.INFO)
    question = "社員食堂の日替わり定食はいくら？"
    first = await engine.run(question)
    second = await engine.run("Where is bicycle parking?")
    assert grader.name.startswith("local-") and grader.name != "local-reader"
    assert "450円" in first.answer and "B1" in second.answer
    said = [r for r in caplog.records if "relevance model" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING, [r.getMessage() for r in said]
    assert "feature grader" in said[0].getMessage() and "FileNotFoundError" in said[0].getMessage()


def test_the_damaged_weights_file_means_no_model(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from crag.stages.grade.relevance_model import RelevanceModel

    bad = tmp_path / "relevance.weights"
    bad.write_bytes(b"not a weights file")
    assert RelevanceModel.load(bad) is None
    assert any("relevance model not loaded" in r.getMessage() for r in caplog.records)


async def test_the_extract_is_the_windows_read_as_answering(corpus: CragSettings) -> None:
    """With a language model, refinement costs no call of its own: the passage is cut down to the
    windows the model read as answering (CRAG's knowledge refinement)."""
    filler = "".join(f"第{i}条の規定はこのとおりとする。" for i in range(40))
    fact = "駐輪場は地下1階にあり、利用には総務部への登録が必要です。"
    long = Chunk(id="l", file="f.md", title="規程", text=filler + fact, url="")
    short = Chunk(id="s", file="g.md", title="案内", text="駐輪場は地下1階です。", url="")
    question = "駐輪場ってどこ？"
    _, grader = _engine(corpus, FakeModel({question: "駐輪場"}))
    grades, extracts = await grader.grade_extracting(question, [long, short, long], [True, True, False])
    assert grades[0] > 0.8 and grades[1] > 0.8
    assert [await e for e in extracts] == [pieces(long.text)[-1], None, None]
    _, none = await grader.grade_extracting("関係ない質問？", [long], [True])
    assert [await e for e in none] == [""]


class _Topic:
    """A feature grader whose grades are given: the topic order the reader picks passages by."""

    name = "local-features"

    def __init__(self, grades: list[float]) -> None:
        self.grades = grades

    async def grade(self, question: str, chunks: Sequence[Chunk]) -> list[float]:
        return self.grades[: len(chunks)]


async def test_only_the_most_topical_passages_are_read_and_the_rest_stay_under_the_lower_bound() -> None:
    chunks = [
        Chunk(id=f"c{i}", file=f"f{i}.md", title=f"t{i}", text=f"passage {i} fact{i}", url="")
        for i in range(10)
    ]
    # The answering passage is the 9th by the search's order but among the most topical.
    topical = [0.9, 0.1, 0.8, 0.2, 0.7, 0.3, 0.65, 0.05, 0.6, 0.55]
    model = FakeModel({"q": "fact8"})
    grader = ReadingGrader(_Topic(topical), lambda: model, Anchors(upper=2.0, lower=0.0))  # type: ignore[arg-type,return-value]
    grades = await grader.grade("q", chunks)
    read = {text.split("passage ")[1].split(" ")[0] for text in model.read}
    assert (
        read
        == {"0", "2", "4", "6", "8", "9"}
        == {str(i) for i in sorted(range(10), key=lambda i: -topical[i])[:READ_AT_MOST]}
    )
    assert grades[8] > 0.8 and all(grades[i] < 0.4 for i in range(10) if i != 8)
    assert all(grades[i] == min(topical[i], UNREAD) for i in (1, 3, 5, 7))


async def test_the_topic_weight_adds_the_feature_grade_to_the_logit() -> None:
    chunks = [
        Chunk(id=f"c{i}", file=f"f{i}.md", title=f"t{i}", text=f"passage {i} fact", url="") for i in range(2)
    ]
    model = FakeModel({"q": "fact"})  # both read alike: logit 5
    plain = ReadingGrader(_Topic([0.9, 0.1]), lambda: model, Anchors(upper=5.0, lower=0.0))  # type: ignore[arg-type,return-value]
    weighted = ReadingGrader(
        _Topic([0.9, 0.1]), lambda: model, Anchors(upper=9.0, lower=4.0, topic_weight=5.0)
    )  # type: ignore[arg-type,return-value]
    same = await plain.grade("q", chunks)
    assert same[0] == same[1] == 0.8
    # 5 + 5 * 0.9 = 9.5 is over the upper anchor; 5 + 5 * 0.1 = 5.5 is in the band between 0.4 and 0.8.
    high, low = await weighted.grade("q", chunks)
    assert high > 0.8 and 0.4 < low < 0.8
    assert round(Anchors(upper=9.0, lower=4.0, topic_weight=5.0).grade(5.0, 0.9), 3) == high
