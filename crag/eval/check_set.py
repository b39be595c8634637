"""crag-eval --check SET_DIR: whether an evaluation set holds to its rules.

A set is corpus/, questions.jsonl (twelve fields a row) and web_fixtures.jsonl (one recorded search a
question), with a rules.toml that says what this set must hold (crag/eval/set_rules.py). The checker
reads the corpus as written (crag/eval/set_corpus.py), then checks the corpus' shape, the ids, each
question (crag/eval/set_questions.py) and its fixture (crag/eval/set_fixtures.py), and the count of
each kind in each language. Every problem is one line; none stops the others being found.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crag.eval.metrics import normalize
from crag.eval.set_corpus import Document, read_document
from crag.eval.set_fixtures import fixture_problems, organic_results
from crag.eval.set_questions import answer_problems, row_problems, shape_problems
from crag.eval.set_rules import LANGS, RulesError, SetRules, load_rules

# A document with fewer headings than this cannot place gold answers in sections.
MIN_HEADINGS = 4


class SetError(ValueError):
    """A folder that cannot be checked: not there, without its files or with a broken rules.toml."""


@dataclass
class Verdict:
    problems: list[str] = field(default_factory=list)
    questions: int = 0
    fixtures: int = 0
    files: Counter[str] = field(default_factory=Counter)  # format -> corpus files
    langs: Counter[str] = field(default_factory=Counter)  # language -> corpus documents

    def summary(self, root: Path) -> str:
        formats = ", ".join(f"{n} {suffix}" for suffix, n in sorted(self.files.items()))
        langs = ", ".join(f"{n} {lang}" for lang, n in sorted(self.langs.items()))
        return (
            f"OK: {root}: {self.questions} questions, {self.fixtures} web fixtures, "
            f"{self.files.total()} corpus files ({formats}; {langs})"
        )


def check_set(root: Path) -> Verdict:
    """Every problem of the set in `root`; raises SetError when it cannot be checked at all."""
    if not root.is_dir():
        raise SetError(f"{root}: no such folder")
    for need, there in (
        ("corpus", Path.is_dir),
        ("questions.jsonl", Path.is_file),
        ("web_fixtures.jsonl", Path.is_file),
    ):
        if not there(root / need):
            raise SetError(f"{root}: no {need} (is it an evaluation set's folder?)")
    try:
        rules = load_rules(root)
    except RulesError as exc:
        raise SetError(str(exc)) from None
    verdict = Verdict()
    docs = _corpus(root, rules, verdict)
    questions = _rows(root / "questions.jsonl", verdict.problems)
    fixtures = _rows(root / "web_fixtures.jsonl", verdict.problems)
    verdict.questions, verdict.fixtures = len(questions), len(fixtures)
    by_id = _fixtures_by_id(questions, fixtures, rules.id_prefix, verdict.problems)
    counts: Counter[tuple[str, str]] = Counter()
    for q in questions:
        shape = list(shape_problems(q, rules.kinds))
        verdict.problems += shape
        if not shape:
            counts[(q["kind"], q["lang"])] += 1
            verdict.problems += _question_problems(q, docs, by_id.get(q["id"]), rules)
    verdict.problems += _distribution(counts, rules)
    return verdict


def _question_problems(
    q: dict[str, Any], docs: dict[str, Document], fixture: dict[str, Any] | None, rules: SetRules
) -> list[str]:
    problems = [*row_problems(q), *answer_problems(q, docs, organic_results(fixture))]
    if fixture is not None:
        problems += fixture_problems(q, fixture, rules.company_markers)
    return problems


def _corpus(root: Path, rules: SetRules, verdict: Verdict) -> dict[str, Document]:
    """The corpus' documents by file name, after checking its formats, languages and headings."""
    files = sorted(p for p in (root / "corpus").iterdir() if p.is_file())
    docs: dict[str, Document] = {}
    for path in files:
        try:
            docs[path.name] = read_document(path, rules.txt_headings)
        except (OSError, ValueError) as exc:
            verdict.problems.append(f"corpus/{path.name}: cannot read it ({exc})")
    verdict.files = Counter(p.suffix for p in files)
    verdict.langs = Counter(doc.lang for doc in docs.values())
    want_files = sum(rules.formats.values())
    if len(files) != want_files:
        verdict.problems.append(f"corpus: {len(files)} files, expected {want_files}")
    verdict.problems += _tally(verdict.files, rules.formats, "files")
    verdict.problems += _tally(verdict.langs, rules.languages, "documents")
    for name, doc in docs.items():
        if len(doc.sections) < MIN_HEADINGS:
            verdict.problems.append(f"corpus/{name}: only {len(doc.sections)} headings found")
    verdict.problems += _shared_files(files, rules)
    return docs


def _tally(have: Counter[str], want: dict[str, int], noun: str) -> list[str]:
    """A problem for each format or language whose count differs from the rules' (0 when unlisted)."""
    return [
        f"corpus: {have[key]} {key or 'suffix-less'} {noun}, expected {want.get(key, 0)}"
        for key in sorted(set(want) | set(have))
        if have[key] != want.get(key, 0)
    ]


def _shared_files(files: list[Path], rules: SetRules) -> list[str]:
    """corpus/ against the folder the rules say it copies, or the one it must share nothing with."""
    ours = {p.name: p.read_bytes() for p in files}
    problems = []
    if rules.copy_of is not None:
        theirs = _contents(rules.copy_of)
        differ = sorted(n for n in set(theirs) | set(ours) if theirs.get(n) != ours.get(n))
        if differ:
            problems.append(f"corpus/ differs from {rules.copy_of}: {differ}")
    if rules.shares_nothing_with is not None:
        theirs = _contents(rules.shares_nothing_with)
        shared = sorted(n for n in ours if n in theirs or ours[n] in theirs.values())
        if shared:
            problems.append(f"corpus/ shares files with {rules.shares_nothing_with}: {shared}")
    return problems


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


def _rows(path: Path, problems: list[str]) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file; a line that is not one is a problem, not the end."""
    try:
        lines = path.read_text("utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise SetError(f"{path}: cannot read it ({exc})") from None
    rows = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{path.name}:{n}: invalid JSON ({exc})")
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            problems.append(f"{path.name}:{n}: not a JSON object")
    return rows


def _fixtures_by_id(
    questions: list[dict[str, Any]], fixtures: list[dict[str, Any]], prefix: str, problems: list[str]
) -> dict[str | None, dict[str, Any]]:
    """The fixtures by query_id, after checking that the ids run prefix001.. in order, that no question
    is asked twice and that each question has exactly one fixture."""
    ids = [_text_or_none(q.get("id")) for q in questions]
    if ids != [f"{prefix}{i:03d}" for i in range(1, len(questions) + 1)]:
        problems.append(f"questions: ids are not {prefix}001..{prefix}NNN in order")
    texts = [_text_or_none(q.get("question")) for q in questions]
    if len({normalize(t) if t is not None else None for t in texts}) != len(questions):
        problems.append("questions: duplicate question texts")
    by_id: dict[str | None, dict[str, Any]] = {}
    for fixture in fixtures:
        qid = _text_or_none(fixture.get("query_id"))
        if qid in by_id:
            problems.append(f"web_fixtures: duplicate fixture for {qid}")
        by_id[qid] = fixture
    if set(by_id) != set(ids):
        missing, extra = sorted(set(ids) - set(by_id), key=str), sorted(set(by_id) - set(ids), key=str)
        problems.append(f"web_fixtures: ids differ from questions (missing {missing[:5]}, extra {extra[:5]})")
    return by_id


def _text_or_none(value: Any) -> str | None:
    """An id or a question as read, None when it is not a string (a shape problem of its row)."""
    return value if isinstance(value, str) else None


def _distribution(counts: Counter[tuple[str, str]], rules: SetRules) -> list[str]:
    problems = []
    for kind, want in rules.kinds.items():
        ja, en = (counts[(kind, lang)] for lang in LANGS)
        if ja + en != want:
            problems.append(f"kind {kind}: {ja + en} questions, expected {want}")
        if abs(ja - en) > rules.ja_en_gap:
            problems.append(
                f"kind {kind}: ja/en unbalanced ({ja}/{en}; the rules allow {rules.ja_en_gap} apart)"
            )
    return problems
