"""Rated-down and refused answers as an evaluation set a reviewer completes (`python -m feedback
to-eval`, also `python -m feedback to-eval`): the feedback loop's way back into `crag.eval`.

Each distinct question (compared as crag.eval does: NFKC, spaces dropped, case folded) becomes one
row of questions.jsonl in the shared format (crag/eval/dataset.py), with no gold answer yet and,
under `review`, what the bot said each time: the answer, its branch and sources, the rating's
comment. Its id is a hash of that normalized text, so a question exported again keeps its id and
`python -m crag.cli.eval compare` can follow it from one run to the next.

A refused answer is the fixed "cannot answer" text (texts.REFUSAL), which the generators return
exactly; the stores keep the text, not a flag.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from crag.eval.dataset import EXPORT_TODO, write_dataset
from crag.eval.metrics import normalize
from hosting.ui_texts import REFUSAL

Reason = Literal["rated_down", "refused"]
REVIEW_ANSWERS = 5  # distinct answers kept per question in the review notes (the latest ones)

_COLUMNS = (
    "a.result_id, a.created_at, a.language, a.question, a.answer, a.branch, a.cited_files, a.web_urls, "
    "f.reaction, f.comment"
)


@dataclass(frozen=True)
class Flagged:
    """One answer the bot gave that someone disliked, or that was a refusal."""

    result_id: str
    asked_at: str
    language: str
    question: str
    answer: str
    branch: str
    cited_files: list[str]
    web_urls: list[str]
    reasons: tuple[Reason, ...]
    comment: str


def _query(down: bool, refused: bool, placeholders: list[str]) -> str:
    conditions = []
    if down:
        conditions.append("f.reaction = 'down'")
    if refused:
        conditions.append(f"a.answer IN ({', '.join(placeholders)})")
    return (
        f"SELECT {_COLUMNS} FROM answers a LEFT JOIN answer_feedback f ON f.result_id = a.result_id "
        f"WHERE {' OR '.join(conditions)} ORDER BY a.created_at, a.result_id"
    )


def _refusals() -> list[str]:
    return sorted(set(REFUSAL.values()))


def read_sqlite(db: Path, down: bool, refused: bool) -> list[Flagged]:
    if not db.is_file():
        raise FileNotFoundError(f"feedback database not found: {db}")
    refusals = _refusals()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        conn.row_factory = sqlite3.Row
        rows = conn.execute(
            _query(down, refused, ["?"] * len(refusals)), refusals if refused else []
        ).fetchall()
        return [_flagged(dict(r)) for r in rows]
    finally:
        conn.close()


async def read_postgres(dsn: str, down: bool, refused: bool, entra: bool = False) -> list[Flagged]:
    from feedback.postgres_store import fetch_rows

    refusals = _refusals()
    placeholders = [f"${i + 1}" for i in range(len(refusals))]
    query = _query(down, refused, placeholders)
    rows = await fetch_rows(dsn, query, *(refusals if refused else []), entra=entra)
    return [_flagged(r) for r in rows]


def _flagged(row: dict[str, Any]) -> Flagged:
    reasons: list[Reason] = []
    if row["reaction"] == "down":
        reasons.append("rated_down")
    if row["answer"] in REFUSAL.values():
        reasons.append("refused")
    asked = row["created_at"]
    return Flagged(
        result_id=row["result_id"],
        asked_at=asked.isoformat() if isinstance(asked, datetime) else str(asked),
        language=row["language"],
        question=row["question"],
        answer=row["answer"],
        branch=row["branch"],
        cited_files=json.loads(row["cited_files"] or "[]"),
        web_urls=json.loads(row["web_urls"] or "[]"),
        reasons=tuple(reasons),
        comment=row["comment"] or "",
    )


def question_id(question: str) -> str:
    return "fb-" + hashlib.sha256(normalize(question).encode()).hexdigest()[:12]


def to_questions(flagged: list[Flagged]) -> list[dict[str, Any]]:
    """One row per distinct question, in the order first asked, with its review notes."""
    groups: dict[str, list[Flagged]] = {}
    for f in flagged:
        if normalize(f.question):
            groups.setdefault(normalize(f.question), []).append(f)
    rows: list[dict[str, Any]] = []
    for group in groups.values():
        first = group[0]
        reasons = sorted({r for f in group for r in f.reasons})
        answers: dict[str, dict[str, Any]] = {}
        for f in group:  # one entry per answer given (an answer rated by two users is one entry)
            entry = answers.setdefault(
                f.result_id,
                {
                    "asked_at": f.asked_at,
                    "answer": f.answer,
                    "branch": f.branch,
                    "cited_files": f.cited_files,
                    "web_urls": f.web_urls,
                    "reasons": [],
                    "comments": [],
                },
            )
            entry["reasons"] = sorted({*entry["reasons"], *f.reasons})
            if f.comment and f.comment not in entry["comments"]:
                entry["comments"].append(f.comment)
        rows.append(
            {
                "id": question_id(first.question),
                "question": first.question,
                "answers": [],
                "gold_file": None,
                # Placeholders the loader needs, set for the fix the team is after: the documents
                # answering it. The reviewer corrects them (see todo).
                "in_corpus": True,
                "expected_branch": "correct",
                "kind": "rated_down" if "rated_down" in reasons else "refused",
                "lang": first.language,
                "review": {
                    "todo": EXPORT_TODO,
                    "reasons": reasons,
                    "times_asked": len(answers),
                    "first_asked": group[0].asked_at,
                    "last_asked": group[-1].asked_at,
                    "comments": [c for entry in answers.values() for c in entry["comments"]],
                    "answers": list(answers.values())[-REVIEW_ANSWERS:],
                },
            }
        )
    return rows


def export(flagged: list[Flagged], corpus: Path, out: Path) -> list[dict[str, Any]]:
    """Write the evaluation set to `out` (a copy of `corpus` with it); returns its questions."""
    questions = to_questions(flagged)
    write_dataset(out, questions, corpus)
    return questions
