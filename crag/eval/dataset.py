"""The evaluation dataset format (see DESIGN §5): corpus/, questions.jsonl, web_fixtures.jsonl."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field


class Question(BaseModel):
    id: str
    question: str
    answers: list[str] = Field(default_factory=list)
    gold_file: str | None = None
    in_corpus: bool
    expected_branch: Literal["correct", "ambiguous", "incorrect"]
    # Withheld questions the corpus may partly answer anyway (see the dataset README).
    answer_near_in_corpus: bool | None = None


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
