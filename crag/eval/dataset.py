"""The evaluation dataset format (see DESIGN §5): corpus/, questions.jsonl, web_fixtures.jsonl."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from crag.models import Turn


class Question(BaseModel):
    id: str
    question: str
    answers: list[str] = Field(default_factory=list)
    gold_file: str | None = None
    in_corpus: bool
    expected_branch: Literal["correct", "ambiguous", "incorrect"]
    # Withheld questions the corpus may partly answer anyway (see the dataset README).
    answer_near_in_corpus: bool | None = None
    # Optional (DESIGN §5): the kind of question (literal, paraphrase, cross_language, ...) for a
    # breakdown; its language; earlier turns passed to the engine; groups of answer variants that
    # must all appear (multi-part questions); every file that holds a part of the answer.
    kind: str | None = None
    lang: str | None = None
    history: list[Turn] | None = None
    answers_all: list[list[str]] | None = None
    gold_files: list[str] | None = None

    @property
    def gold_set(self) -> list[str]:
        """The files that answer it: gold_files, or gold_file alone."""
        if self.gold_files:
            return list(self.gold_files)
        return [self.gold_file] if self.gold_file else []


class Dataset(BaseModel):
    root: Path
    questions: list[Question]
    web_fixtures: dict[str, dict[str, Any]]  # query_id -> recorded SerpAPI response

    @property
    def corpus(self) -> Path:
        return self.root / "corpus"


def load_dataset(root: Path) -> Dataset:
    if not (root / "corpus").is_dir() or not (root / "questions.jsonl").is_file():
        raise FileNotFoundError(f"{root} is not a dataset folder (needs corpus/ and questions.jsonl)")
    questions = [Question.model_validate_json(line) for line in _lines(root / "questions.jsonl")]
    fixtures: dict[str, dict[str, Any]] = {}
    fixture_file = root / "web_fixtures.jsonl"
    if fixture_file.is_file():
        for line in _lines(fixture_file):
            row = json.loads(line)
            fixtures[str(row["query_id"])] = row
    return Dataset(root=root, questions=questions, web_fixtures=fixtures)


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text("utf-8").splitlines() if line.strip()]
