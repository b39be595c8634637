#!/usr/bin/env python3
"""Validates an evaluation set of this folder's schema; exits non-zero on any violation.

Sets: data/eval/sample-docs and data/eval/sample-docs-2 (corpus: a byte-for-byte copy of sample_docs/,
Minato Tech),
data/eval/fit-hokuyo and data/eval/fit-minami (the fitting sets, with their own corpora of Hokuyo Logistics
and Minami
Hotels documents) and
data/eval/held-setouchi (a held-out set with its own corpus of Setouchi Foods documents);
a set with a corpus of its own must not share a file with sample_docs/. Every corpus is 12
Markdown/plain-text files, 7 Japanese and 5 English.

Usage: python check.py [SET_DIR]   (default: the folder this file is in)
Standard library only. Adapted from data/eval/business-dev/check.py (same schema; these
corpora are Markdown and plain text only, and their counts are different).
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

# Per set (its folder's name): the id prefix and the number of questions of each kind.
SETS = {
    "sample-docs": (
        "sd-",
        {
            "literal": 15,
            "paraphrase": 31,
            "cross_language": 15,
            "topic_mentioned_fact_absent": 19,
            "off_topic": 11,
            "multi_part": 15,
            "follow_up": 15,
        },
    ),
    "sample-docs-2": (
        "s2-",
        {
            "paraphrase": 34,
            "cross_language": 16,
            "topic_mentioned_fact_absent": 14,
            "off_topic": 8,
            "multi_part": 12,
            "follow_up": 6,
        },
    ),
    "fit-hokuyo": (
        "fh-",
        {
            "paraphrase": 60,
            "cross_language": 25,
            "topic_mentioned_fact_absent": 25,
            "off_topic": 15,
            "multi_part": 20,
            "follow_up": 15,
        },
    ),
    "fit-minami": (
        "fm-",
        {
            "paraphrase": 60,
            "cross_language": 25,
            "topic_mentioned_fact_absent": 25,
            "off_topic": 15,
            "multi_part": 20,
            "follow_up": 15,
        },
    ),
    "held-setouchi": (
        "hs-",
        {
            "literal": 20,
            "paraphrase": 40,
            "cross_language": 20,
            "topic_mentioned_fact_absent": 25,
            "off_topic": 15,
            "multi_part": 20,
            "follow_up": 20,
        },
    ),
}
# Sets whose corpus/ is a copy of the repository's sample_docs/; the others have a corpus of their own.
SAMPLE_DOCS_COPIES = {"sample-docs", "sample-docs-2"}
IN_CORPUS_KINDS = {"literal", "paraphrase", "cross_language", "multi_part", "follow_up"}
FIELDS = {
    "id",
    "question",
    "answers",
    "gold_file",
    "in_corpus",
    "expected_branch",
    "kind",
    "lang",
    "gold_section",
    "answers_all",
    "gold_files",
    "history",
}
CORPUS_LANGS = {"ja": 7, "en": 5}
# Words that would make a web result look like the company's own rule.
COMPANY_MARKERS = [
    "minato tech",
    "minatotech",
    "ミナトテック",
    "kei-flow",
    "tabinavi",
    "timedeck",
    "minatodesk",
    "minatoconnect",
    "minatogpt",
    "visitordesk",
    "guestpass",
    "mt-procure",
    "minato health",
    "minato life",
    "minato academy",
    "minato ledger",
    "minato sign",
    "mt-corp",
    "mt-byod",
    "mt-guest",
    # fit-hokuyo's company and systems
    "hokuyo",
    "北陽",
    "ほくよう",
    "hokutime",
    "ホクタイム",
    "hokukei",
    "ホクケイ",
    "ホクトラベル",
    "hokudesk",
    "hokushare",
    "hokuai",
    "hokuvision",
    "gestboard",
    "ゲストボード",
    "バースナビ",
    "ベネステーション",
    # fit-minami's company and systems
    "minami",
    "南ホテルズ",
    "ミナミ",
    "hibis",
    "ハイビス",
    "sango",
    "サンゴpms",
    "deigo",
    "デイゴ",
    "kuroshio",
    "スタッフステイ",
    "みなみネット",
    "南友会",
    "keywave",
    "mh-crew",
    # held-setouchi's company and systems
    "setouchi",
    "瀬戸内",
    "せとうち",
    "しおかぜ",
    "shiokaze",
    "カモメ精算",
    "kamome seisan",
    "たびしま",
    "tabishima",
    "nagidesk",
    "nagi assist",
    "uzushio",
    "seto campus",
    "ゲートノート",
    "gate note",
    "sf-qc",
    "いこいパス",
    "hareru work",
    "sf-connect",
]

errors: list[str] = []


def fail(msg: str) -> None:
    errors.append(msg)


def norm(text: str) -> str:
    """What the harness compares: NFKC, no whitespace, case-folded."""
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text)).lower()


# ---------------------------------------------------------------- corpus text and sections


def sections_of(path: Path) -> dict[str, str]:
    """heading -> text up to the next heading of any level.

    Markdown: `#` headings. business_travel.txt: paragraphs that start with 【label】.
    meeting_rooms_and_office.txt: paragraphs that start with a short 'Label. ' lead-in.
    """
    out: dict[str, list[str]] = {}
    current = None
    for line in path.read_text("utf-8").splitlines():
        heading, rest = None, line
        if path.suffix == ".md":
            m = re.match(r"^#{1,6}\s+(.*)$", line)
            if m:
                heading, rest = m.group(1).strip(), ""
        else:
            m = re.match(r"^【([^】]+)】(.*)$", line) or re.match(r"^([A-Z][A-Za-z ,&-]{2,40})\. (.*)$", line)
            if m:
                heading, rest = m.group(1).strip(), m.group(2)
        if heading is not None:
            current = heading
            out.setdefault(current, [])
        if current is not None and rest:
            out[current].append(rest)
    return {k: "\n".join(v) for k, v in out.items()}


def lang_of(text: str) -> str:
    jp = len(re.findall(r"[\u3040-\u30ff\u4e00-\u9fff]", text))
    latin = len(re.findall(r"[A-Za-z]", text))
    return "ja" if jp > latin * 0.5 else "en"


def load_jsonl(path: Path) -> list[dict]:
    rows = []
    for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            fail(f"{path.name}:{n}: invalid JSON ({exc})")
    return rows


def main(root: Path, quiet: bool = False) -> int:
    errors.clear()
    say = (lambda *a: None) if quiet else print
    set_name = root.resolve().name
    if set_name not in SETS:
        fail(f"{root}: not one of the sets this checks ({', '.join(SETS)})")
        say(errors[-1])
        return 1
    prefix, kinds = SETS[set_name]
    corpus_dir = root / "corpus"
    files = sorted(p for p in corpus_dir.iterdir() if p.is_file())
    texts = {p.name: p.read_text("utf-8") for p in files}
    sections = {p.name: sections_of(p) for p in files}
    doc_lang = {name: lang_of(t) for name, t in texts.items()}

    # corpus shape; a copy of the repository's sample_docs/ (when it is next to us) for the sets that use it,
    # and sharing no file with it for the sets that have their own corpus
    if any(p.suffix not in (".md", ".txt") for p in files):
        fail("corpus: only .md and .txt files expected")
    langs = Counter(doc_lang.values())
    for lang, want in CORPUS_LANGS.items():
        if langs[lang] != want:
            fail(f"corpus: {langs[lang]} {lang} documents, expected {want}")
    for name, secs in sections.items():
        if len(secs) < 4:
            fail(f"corpus/{name}: only {len(secs)} headings found")
    sample_docs = root.resolve().parent.parent / "sample_docs"
    if sample_docs.is_dir():
        theirs = {p.name: p.read_bytes() for p in sample_docs.iterdir() if p.is_file()}
        ours = {p.name: p.read_bytes() for p in files}
        if set_name in SAMPLE_DOCS_COPIES and theirs != ours:
            diff = sorted(n for n in set(theirs) | set(ours) if theirs.get(n) != ours.get(n))
            fail(f"corpus/ differs from {sample_docs}: {diff}")
        if set_name not in SAMPLE_DOCS_COPIES:
            shared = sorted(n for n in ours if n in theirs or ours[n] in theirs.values())
            if shared:
                fail(f"corpus/ shares files with {sample_docs}: {shared}")

    questions = load_jsonl(root / "questions.jsonl")
    fixtures = load_jsonl(root / "web_fixtures.jsonl")

    ids = [q.get("id") for q in questions]
    if ids != [f"{prefix}{i:03d}" for i in range(1, len(questions) + 1)]:
        fail(f"questions: ids are not {prefix}001..{prefix}NNN in order")
    if len({norm(q.get("question", "")) for q in questions}) != len(questions):
        fail("questions: duplicate question texts")

    fx_by_id: dict[str, dict] = {}
    for fx in fixtures:
        qid = fx.get("query_id")
        if qid in fx_by_id:
            fail(f"web_fixtures: duplicate fixture for {qid}")
        fx_by_id[qid] = fx
    if set(fx_by_id) != set(ids):
        fail(
            f"web_fixtures: ids differ from questions (missing {sorted(set(ids) - set(fx_by_id))[:5]}, "
            f"extra {sorted(set(fx_by_id) - set(ids))[:5]})"
        )

    counts: Counter = Counter()
    for q in questions:
        where = q.get("id", "?")
        if set(q) != FIELDS:
            fail(f"{where}: fields {sorted(set(q) ^ FIELDS)} wrong (missing or extra)")
            continue
        kind, lang = q["kind"], q["lang"]
        counts[(kind, lang)] += 1
        if kind not in kinds:
            fail(f"{where}: unknown kind {kind!r}")
            continue
        if lang not in ("ja", "en"):
            fail(f"{where}: lang {lang!r}")
        if lang_of(q["question"]) != lang:
            fail(f"{where}: question text does not look like {lang}")
        answers = q["answers"]
        if not isinstance(answers, list) or not all(isinstance(a, str) and a.strip() for a in answers):
            fail(f"{where}: answers must be a list of non-empty strings")
            continue
        in_corpus = kind in IN_CORPUS_KINDS
        if q["in_corpus"] is not in_corpus:
            fail(f"{where}: in_corpus should be {in_corpus} for {kind}")
        if q["expected_branch"] != ("correct" if in_corpus else "incorrect"):
            fail(f"{where}: expected_branch should be {'correct' if in_corpus else 'incorrect'}")
        if kind != "multi_part" and (q["answers_all"] is not None or q["gold_files"] is not None):
            fail(f"{where}: answers_all/gold_files must be null for {kind}")
        if kind != "follow_up" and q["history"] is not None:
            fail(f"{where}: history must be null for {kind}")

        fx = fx_by_id.get(where)
        organic = (fx or {}).get("serpapi", {}).get("organic_results", [])

        if in_corpus:
            gold = q["gold_file"]
            if gold not in texts:
                fail(f"{where}: gold_file {gold!r} not in corpus/")
                continue
            if not 1 <= len(answers) <= 3:
                fail(f"{where}: {len(answers)} answer variants (want 1-3)")
            for a in answers:
                if a not in texts[gold]:
                    fail(f"{where}: answer {a!r} not verbatim in {gold}")
            section = q["gold_section"]
            if section not in sections[gold]:
                fail(f"{where}: gold_section {section!r} is not a heading of {gold}")
            elif not any(a in sections[gold][section] for a in answers):
                fail(f"{where}: no answer variant inside section {section!r} of {gold}")
            if kind in ("literal", "paraphrase") and doc_lang[gold] != lang:
                fail(f"{where}: {kind} question should be in the document's language ({doc_lang[gold]})")
            if kind == "cross_language" and doc_lang[gold] == lang:
                fail(f"{where}: cross_language question is in the document's language")
            if kind == "multi_part":
                groups, gfiles = q["answers_all"], q["gold_files"]
                if not (
                    isinstance(groups, list)
                    and len(groups) >= 2
                    and all(isinstance(g, list) and g for g in groups)
                ):
                    fail(f"{where}: answers_all must list at least 2 non-empty groups")
                    continue
                if not (
                    isinstance(gfiles, list) and gfiles and gold in gfiles and all(f in texts for f in gfiles)
                ):
                    fail(f"{where}: gold_files must list corpus files including gold_file")
                    continue
                if answers != groups[0]:
                    fail(f"{where}: answers should equal answers_all[0]")
                for gi, group in enumerate(groups):
                    if not any(all(a in texts[f] for a in group) for f in gfiles):
                        fail(f"{where}: answers_all group {gi} not found in any gold file ({group})")
                used = {f for f in gfiles if any(any(a in texts[f] for a in g) for g in groups)}
                if used != set(gfiles):
                    fail(f"{where}: gold_files lists files no group needs: {sorted(set(gfiles) - used)}")
            if kind == "follow_up":
                hist = q["history"]
                if not (
                    isinstance(hist, list)
                    and hist
                    and all(
                        isinstance(h, dict)
                        and set(h) == {"question", "answer"}
                        and all(isinstance(v, str) and v.strip() for v in h.values())
                        for h in hist
                    )
                ):
                    fail(f"{where}: history must be a non-empty list of {{question, answer}}")
            all_answers = [a for g in (q["answers_all"] or [answers]) for a in g]
            for r in organic:
                blob = norm(r.get("title", "") + " " + r.get("snippet", ""))
                for a in all_answers:
                    if norm(a) in blob:
                        fail(f"{where}: web result {r.get('position')} contains gold answer {a!r}")
        elif kind == "topic_mentioned_fact_absent":
            if answers:
                fail(f"{where}: fact-absent question must have answers == []")
            if q["gold_file"] is not None or q["gold_section"] is not None:
                fail(f"{where}: fact-absent question must have gold_file/gold_section null")
        elif kind == "off_topic":
            if not answers:
                fail(f"{where}: off_topic question needs answers (found in web result 1)")
            if q["gold_file"] is not None or q["gold_section"] is not None:
                fail(f"{where}: off_topic question must have gold_file/gold_section null")
            if organic:
                first = organic[0].get("snippet", "")
                missing = [a for a in answers if a not in first]
                if missing:
                    fail(f"{where}: answers {missing} not verbatim in web result 1 snippet")
                for r in organic[1:]:
                    if any(norm(a) in norm(r.get("snippet", "")) for a in answers):
                        fail(f"{where}: distractor result {r.get('position')} contains the answer")
                for a in answers:
                    for name, t in texts.items():
                        if len(norm(a)) >= 4 and norm(a) in norm(t):
                            fail(f"{where}: off_topic answer {a!r} also appears in corpus/{name}")

        if fx is None:
            continue
        sp = fx.get("serpapi", {})
        if fx.get("question") != q["question"]:
            fail(f"{where}: fixture question differs")
        if sp.get("search_metadata") != {"id": f"fixture-{where}", "status": "Success"}:
            fail(f"{where}: fixture search_metadata wrong")
        want_params = {
            "engine": "google",
            "q": q["question"],
            "hl": lang,
            "gl": "jp" if lang == "ja" else "us",
            "google_domain": "google.co.jp" if lang == "ja" else "google.com",
        }
        if sp.get("search_parameters") != want_params:
            fail(f"{where}: fixture search_parameters wrong")
        if sp.get("related_questions") != []:
            fail(f"{where}: related_questions must be []")
        if [r.get("position") for r in organic] != [1, 2, 3]:
            fail(f"{where}: fixture must have organic results at positions 1, 2, 3")
        for r in organic:
            if set(r) != {"position", "title", "link", "displayed_link", "source", "snippet"}:
                fail(f"{where}: web result {r.get('position')} has fields {sorted(r)}")
                continue
            host = urlsplit(r["link"]).netloc
            if not (host in ("ja.wikipedia.org", "en.wikipedia.org") or host.endswith(".example.com")):
                fail(f"{where}: web result host {host!r} is neither Wikipedia nor *.example.com")
            blob = (r["title"] + " " + r["snippet"] + " " + r["link"]).lower()
            for marker in COMPANY_MARKERS:
                if marker in blob:
                    fail(f"{where}: web result {r['position']} mentions {marker!r}")

    say("counts per kind x language:")
    say(f"  {'kind':30s} {'ja':>4s} {'en':>4s} {'total':>6s} {'want':>5s}")
    for kind, want in kinds.items():
        ja, en = counts[(kind, "ja")], counts[(kind, "en")]
        say(f"  {kind:30s} {ja:4d} {en:4d} {ja + en:6d} {want:5d}")
        if ja + en != want:
            fail(f"kind {kind}: {ja + en} questions, expected {want}")
        if abs(ja - en) > 2:
            fail(f"kind {kind}: ja/en unbalanced ({ja}/{en})")
    total_ja = sum(v for (_k, lang), v in counts.items() if lang == "ja")
    total_en = sum(v for (_k, lang), v in counts.items() if lang == "en")
    say(f"  {'TOTAL':30s} {total_ja:4d} {total_en:4d} {total_ja + total_en:6d} {sum(kinds.values()):5d}")
    say(f"corpus: {len(files)} files, languages {dict(sorted(langs.items()))}; fixtures: {len(fixtures)}")

    if errors:
        say(f"\nFAILED: {len(errors)} problem(s)")
        for e in errors:
            say("  -", e)
        return 1
    say("\nOK: all checks passed")
    return 0


if __name__ == "__main__":
    root = (
        Path(sys.argv[1])
        if len(sys.argv) > 1
        else Path(__file__).resolve().parent.parent / "data" / "eval" / "sample-docs"
    )
    sys.exit(main(root))
