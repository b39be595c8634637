"""The evaluation dataset format: corpus/, questions.jsonl, web_fixtures.jsonl."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from crag.core.models import Turn


class Question(BaseModel):
    id: str
    question: str
    answers: list[str] = Field(default_factory=list)
    gold_file: str | None = None
    in_corpus: bool
    expected_branch: Literal["correct", "ambiguous", "incorrect"]
    # Withheld questions the corpus may partly answer anyway (see the dataset README).
    answer_near_in_corpus: bool | None = None
    # Optional: the kind of question (literal, paraphrase, cross_language, ...) for a
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


def after_previous(dataset: Dataset) -> Dataset:
    """The set asked as one conversation: each question without a history of its own comes after
    the question before it in the file (its answer unknown, as the local rewriter never reads it).
    Most neighbours are unrelated, so this measures whether a question that stands alone is still
    answered as it stands when a conversation came before it."""
    questions = list(dataset.questions)
    chained = [
        q
        if q.history or i == 0
        else q.model_copy(update={"history": [Turn(question=questions[i - 1].question, answer="")]})
        for i, q in enumerate(questions)
    ]
    return dataset.model_copy(update={"questions": chained})


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text("utf-8").splitlines() if line.strip()]


EXPORT_TODO = (
    "write answers (short strings the right answer contains) and gold_file; if the documents should "
    "not answer it, set in_corpus to false and expected_branch to incorrect; then delete this todo"
)

_EXPORT_README = """# Evaluation set from feedback

Questions users rated down or the bot refused, exported by `python -m feedback to-eval`
(`python -m feedback to-eval`). Each question of questions.jsonl has no gold answer yet: its
`review` holds what the bot answered each time (branch, cited files, web links, the raters'
comments) and a `todo` for the reviewer. Until `answers` are written, `python -m crag.cli.eval` runs
these questions for routing, retrieval of the cited documents is not scored and answers are not
checked.

corpus/ is a copy of the documents folder at export time: add the document that was missing, or fix
the one that was wrong, and run `python -m crag.cli.eval` on this folder before and after to measure the
fix (`python -m crag.cli.eval compare RUN_BEFORE RUN_AFTER`). web_fixtures.jsonl has no recorded results:
the web finds nothing here, so the runs measure what the documents answer.
"""


def write_dataset(root: Path, questions: Sequence[dict[str, Any]], corpus: Path) -> None:
    """A dataset folder (corpus/ copied from `corpus`, questions.jsonl, web_fixtures.jsonl with no
    recorded results, README.md) that load_dataset reads. Refuses to overwrite another set."""
    if (root / "questions.jsonl").exists():
        raise FileExistsError(
            f"{root} already holds an evaluation set (questions.jsonl); choose another folder"
        )
    if not corpus.is_dir():
        raise FileNotFoundError(f"documents folder not found: {corpus}")
    for row in questions:
        Question.model_validate(row)  # every row loads as the evaluation reads it
    root.mkdir(parents=True, exist_ok=True)
    # Links stay links: the index applies the same rules to them as to the original folder.
    shutil.copytree(corpus, root / "corpus", symlinks=True, ignore=shutil.ignore_patterns(".*", "~$*"))
    (root / "questions.jsonl").write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions), "utf-8"
    )
    fixtures = [
        {
            "query_id": q["id"],
            "question": q["question"],
            "serpapi": {
                "search_metadata": {"id": f"fixture-{q['id']}", "status": "Success"},
                "search_parameters": {"engine": "google", "q": q["question"]},
                "organic_results": [],
                "related_questions": [],
            },
        }
        for q in questions
    ]
    (root / "web_fixtures.jsonl").write_text(
        "".join(json.dumps(f, ensure_ascii=False) + "\n" for f in fixtures), "utf-8"
    )
    (root / "README.md").write_text(_EXPORT_README, "utf-8")
