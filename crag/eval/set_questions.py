"""The checks of one row of an evaluation set's questions.jsonl against the corpus and its web results.

Each check yields a problem as one line that starts with the question's id. What a kind means is
the same in every set: in-corpus kinds have gold answers verbatim in gold_file and inside its
gold_section, fact-absent ones none, off_topic ones theirs in web result 1 and nowhere in the corpus.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from crag.eval.metrics import FACT_ABSENT, normalize
from crag.eval.set_corpus import Document, lang_of
from crag.eval.set_rules import IN_CORPUS_KINDS, LANGS

FIELDS = frozenset(
    {
        *("id", "question", "answers", "gold_file", "in_corpus", "expected_branch", "kind", "lang"),
        *("gold_section", "answers_all", "gold_files", "history"),
    }
)
# An off_topic answer shorter than this (normalized) may stand in the corpus by chance ("1", "H2O").
MIN_CORPUS_CLASH = 4


def shape_problems(q: dict[str, Any], kinds: dict[str, int]) -> Iterator[str]:
    """The fields, kind, language, question and answers of a row: what the other checks read, so
    they run only when this yields nothing."""
    where = q.get("id", "?")
    if set(q) != FIELDS:
        yield f"{where}: fields {sorted(set(q) ^ FIELDS)} wrong (missing or extra)"
        return
    kind, lang, answers = q["kind"], q["lang"], q["answers"]
    if not isinstance(where, str):
        yield f"{where!r}: id must be a string"
    elif not isinstance(kind, str) or kind not in kinds:
        yield f"{where}: kind {kind!r} is not one of this set's kinds ({', '.join(kinds)})"
    elif lang not in LANGS:
        yield f"{where}: lang {lang!r}"
    elif not isinstance(q["question"], str) or not q["question"].strip():
        yield f"{where}: question must be a non-empty string"
    elif not isinstance(answers, list) or not all(isinstance(a, str) and a.strip() for a in answers):
        yield f"{where}: answers must be a list of non-empty strings"


def row_problems(q: dict[str, Any]) -> Iterator[str]:
    """What a well-shaped row's kind says of its language and its other fields."""
    where, kind, lang = q["id"], q["kind"], q["lang"]
    if lang_of(q["question"]) != lang:
        yield f"{where}: question text does not look like {lang}"
    in_corpus = kind in IN_CORPUS_KINDS
    if q["in_corpus"] is not in_corpus:
        yield f"{where}: in_corpus should be {in_corpus} for {kind}"
    if q["expected_branch"] != ("correct" if in_corpus else "incorrect"):
        yield f"{where}: expected_branch should be {'correct' if in_corpus else 'incorrect'}"
    if kind != "multi_part" and (q["answers_all"] is not None or q["gold_files"] is not None):
        yield f"{where}: answers_all/gold_files must be null for {kind}"
    if kind != "follow_up" and q["history"] is not None:
        yield f"{where}: history must be null for {kind}"


def answer_problems(q: dict[str, Any], docs: dict[str, Document], results: list[Any]) -> Iterator[str]:
    """Where a well-formed row's answers stand: the corpus for in-corpus kinds, web result 1 for
    off_topic, nowhere for fact-absent."""
    kind = q["kind"]
    if kind in IN_CORPUS_KINDS:
        yield from _grounded(q, docs)
        yield from _not_given_away(q, results)
    elif kind == FACT_ABSENT:
        if q["answers"]:
            yield f"{q['id']}: fact-absent question must have answers == []"
        if q["gold_file"] is not None or q["gold_section"] is not None:
            yield f"{q['id']}: fact-absent question must have gold_file/gold_section null"
    elif kind == "off_topic":
        yield from _off_topic(q, docs, results)


def _grounded(q: dict[str, Any], docs: dict[str, Document]) -> Iterator[str]:
    where, kind, lang, answers, gold = q["id"], q["kind"], q["lang"], q["answers"], q["gold_file"]
    if not isinstance(gold, str) or gold not in docs:
        yield f"{where}: gold_file {gold!r} not in corpus/"
        return
    doc = docs[gold]
    if not 1 <= len(answers) <= 3:
        yield f"{where}: {len(answers)} answer variants (want 1-3)"
    for a in answers:
        if a not in doc.text:
            yield f"{where}: answer {a!r} not verbatim in {gold}"
    section = q["gold_section"]
    if not isinstance(section, str) or section not in doc.sections:
        yield f"{where}: gold_section {section!r} is not a heading of {gold}"
    elif not any(a in doc.sections[section] for a in answers):
        yield f"{where}: no answer variant inside section {section!r} of {gold}"
    if kind in ("literal", "paraphrase") and doc.lang != lang:
        yield f"{where}: {kind} question should be in the document's language ({doc.lang})"
    if kind == "cross_language" and doc.lang == lang:
        yield f"{where}: cross_language question is in the document's language"
    if kind == "multi_part":
        yield from _multi_part(q, docs)
    if kind == "follow_up":
        yield from _follow_up(q)


def _multi_part(q: dict[str, Any], docs: dict[str, Document]) -> Iterator[str]:
    where, groups, files = q["id"], q["answers_all"], q["gold_files"]
    if not (isinstance(groups, list) and len(groups) >= 2 and all(_strings(g) and g for g in groups)):
        yield f"{where}: answers_all must list at least 2 non-empty groups of strings"
        return
    if not (_strings(files) and files and q["gold_file"] in files and all(f in docs for f in files)):
        yield f"{where}: gold_files must list corpus files including gold_file"
        return
    if q["answers"] != groups[0]:
        yield f"{where}: answers should equal answers_all[0]"
    texts = [docs[f].text for f in files]
    for i, group in enumerate(groups):
        if not any(all(a in text for a in group) for text in texts):
            missing = [a for a in group if not any(a in text for text in texts)]
            yield f"{where}: answers_all group {i} not found in any gold file ({missing or group})"
    used = {f for f in files if any(a in docs[f].text for g in groups for a in g)}
    if used != set(files):
        yield f"{where}: gold_files lists files no group needs: {sorted(set(files) - used)}"


def _follow_up(q: dict[str, Any]) -> Iterator[str]:
    history = q["history"]
    if not (
        isinstance(history, list)
        and history
        and all(
            isinstance(turn, dict)
            and set(turn) == {"question", "answer"}
            and all(isinstance(v, str) and v.strip() for v in turn.values())
            for turn in history
        )
    ):
        yield f"{q['id']}: history must be a non-empty list of {{question, answer}}"


def _not_given_away(q: dict[str, Any], results: list[Any]) -> Iterator[str]:
    """No web result may hold a gold answer: the engine must find it in the documents."""
    groups = q["answers_all"] if isinstance(q["answers_all"], list) and q["answers_all"] else [q["answers"]]
    golds = [a for group in groups if _strings(group) for a in group]
    for r in results:
        blob = normalize(_field(r, "title") + " " + _field(r, "snippet"))
        for a in golds:
            if normalize(a) in blob:
                yield f"{q['id']}: web result {_field(r, 'position')} contains gold answer {a!r}"


def _off_topic(q: dict[str, Any], docs: dict[str, Document], results: list[Any]) -> Iterator[str]:
    where, answers = q["id"], q["answers"]
    if not answers:
        yield f"{where}: off_topic question needs answers (found in web result 1)"
    if q["gold_file"] is not None or q["gold_section"] is not None:
        yield f"{where}: off_topic question must have gold_file/gold_section null"
    if not results:
        return
    missing = [a for a in answers if a not in _field(results[0], "snippet")]
    if missing:
        yield f"{where}: answers {missing} not verbatim in web result 1 snippet"
    for r in results[1:]:
        if any(normalize(a) in normalize(_field(r, "snippet")) for a in answers):
            yield f"{where}: distractor result {_field(r, 'position')} contains the answer"
    for a in answers:
        for name, doc in docs.items():
            if len(normalize(a)) >= MIN_CORPUS_CLASH and normalize(a) in normalize(doc.text):
                yield f"{where}: off_topic answer {a!r} also appears in corpus/{name}"


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _field(result: Any, key: str) -> str:
    """A web result's field as text ("" when the result or the field is missing or not text)."""
    value = result.get(key, "") if isinstance(result, dict) else ""
    return value if isinstance(value, str) else str(value)
