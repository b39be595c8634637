"""Training pairs for the relevance model: (question, passage, does the passage answer it).

JaQuAD (data/train/jaquad/, Japanese Wikipedia): each paragraph is cut into passages of at most
300 characters at sentence ends (the size of a chunk's reading window at turn time). For each
question, one group: the passage holding the answer, then passages that do not hold it — the same
passage with the sentences holding the answer taken out (on topic, every other word shared, the fact
absent: what an employee's question about a detail the documents never state meets), another
passage of the same paragraph, one of another paragraph of the same article, and one of another
article. A negative that contains the answer's
text anywhere is skipped (it may well answer the question in other words).

Business sets add the way employees ask, in Japanese and English: our own fitting sets
(data/eval/sample-docs and fit-hokuyo; never the evaluation sets) and the training sets written for it
(data/train/business/, one fictional company each). The set's corpus is chunked as the bot chunks it; a
chunk of the gold file holding a gold answer is a positive; its negatives are the same chunk with the
answering sentences taken out, chunks sharing the most words with the question that do not hold the
answer (the hard case), and one at random. For questions the corpus does not answer (off-topic, or on
topic with the fact absent) the chunks nearest in words are negatives.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from crag.stages.grade.reading import passage_text, pieces, sentences

FITTING_SETS = ("sample-docs", "fit-hokuyo")  # our own fitting sets; never an evaluation set


@dataclass(frozen=True)
class Group:
    question: str
    passages: tuple[str, ...]  # the first answers the question; the rest do not
    source: str  # "jaquad" or the fitting set's name


def read_squad(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)["data"]


def jaquad_groups(articles: list[dict], seed: int) -> list[Group]:
    rng = random.Random(seed)
    cut = [[(pieces(p["context"]), p) for p in article["paragraphs"]] for article in articles]
    groups: list[Group] = []
    for a, article in enumerate(articles):
        title = article["title"]
        for paragraph_pieces, paragraph in cut[a]:
            starts = _piece_starts(paragraph["context"], paragraph_pieces)
            for qa in paragraph["qas"]:
                answer = qa["answers"][0]
                text, at = answer["text"], answer["answer_start"]
                holding = [i for i, s in enumerate(starts) if s <= at < s + len(paragraph_pieces[i])]
                if not holding or text not in paragraph_pieces[holding[0]]:
                    continue
                positive = paragraph_pieces[holding[0]]
                negatives: list[str] = []
                removed = without_answer(positive, [text])
                if removed:
                    negatives.append(removed)
                same = [p for p in paragraph_pieces if p != positive and text not in p]
                if same:
                    negatives.append(rng.choice(same))
                others = [
                    p
                    for q, (ps, _) in enumerate(cut[a])
                    if ps is not paragraph_pieces
                    for p in ps
                    if text not in p
                ]
                if others:
                    negatives.append(rng.choice(others))
                while True:
                    b = rng.randrange(len(articles))
                    if b != a and cut[b]:
                        ps = rng.choice(cut[b])[0]
                        if ps:
                            negatives.append(passage_text(articles[b]["title"], rng.choice(ps)))
                            break
                negatives = [n if "\n" in n else passage_text(title, n) for n in negatives]
                groups.append(Group(qa["question"], (passage_text(title, positive), *negatives), "jaquad"))
    return groups


def without_answer(passage: str, answers: list[str]) -> str:
    """The passage without its sentences that hold an answer: on topic, the fact absent (the case
    word overlap cannot tell from an answer). Empty when too little is left or the answer remains."""
    kept = "".join(x for x in sentences(passage) if not _holds(x, answers)).strip()
    if len(kept) < 40 or _holds(kept, answers):
        return ""
    return kept


def _piece_starts(context: str, ps: list[str]) -> list[int]:
    starts, at = [], 0
    for p in ps:
        i = context.find(p, at)
        starts.append(max(i, 0))
        at = max(i, 0) + len(p)
    return starts


def corpus_chunks(corpus: Path) -> list[tuple[str, str]]:
    """(file, passage text) of every chunk the bot would index from the folder."""
    from crag.ingest.chunker import chunk_document
    from crag.ingest.loaders import discover, load

    out: list[tuple[str, str]] = []
    for path in discover(corpus):
        doc = load(path, corpus)
        for chunk in chunk_document(doc, 1200, ""):
            for piece in pieces(chunk.text):
                out.append((chunk.file, passage_text(" > ".join(dict.fromkeys(chunk.headers)), piece)))
    return out


def business_sets(root: Path) -> list[Path]:
    """The business sets trained on: the fitting sets, then every training set."""
    fitting = [root / "data" / "eval" / name for name in FITTING_SETS]
    return fitting + sorted(p for p in (root / "data" / "train" / "business").glob("*") if p.is_dir())


def business_groups(set_dir: Path, seed: int, negatives: int = 3) -> list[Group]:
    """Groups from a fitting set: answerable questions lead with a passage holding a gold answer;
    unanswerable ones have only negatives (an empty-positive group: passages[0] is "")."""
    rng = random.Random(seed)
    chunks = corpus_chunks(set_dir / "corpus")
    groups: list[Group] = []
    for line in (set_dir / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        if q.get("history"):
            continue
        answers = [a for a in q.get("answers") or [] if a]
        gold = set(q.get("gold_files") or ([q["gold_file"]] if q.get("gold_file") else []))
        name = set_dir.name
        if q.get("in_corpus") and answers and gold:
            holding = [
                t for f, t in chunks if Path(f).name in {Path(g).name for g in gold} and _holds(t, answers)
            ]
            if not holding:
                continue
            rest = [t for f, t in chunks if not _holds(t, answers)]
            near = sorted(rest, key=lambda t: -_shared(q["question"], t))[: 4 * negatives]
            for positive in holding[:2]:
                header, _, body = positive.partition("\n")
                removed = without_answer(body, answers) if body else ""
                extra = (passage_text(header, removed),) if removed else ()
                hard = rng.sample(near, min(len(near), negatives - 1))
                easy = rng.sample([t for t in rest if t not in hard], 1)
                groups.append(Group(q["question"], (positive, *extra, *hard, *easy), name))
        elif not q.get("in_corpus"):
            # The passages nearest in words are the hard negatives: rank by shared characters.
            near = sorted(chunks, key=lambda c: -_shared(q["question"], c[1]))[: 3 * negatives]
            groups.append(Group(q["question"], ("", *(t for _, t in rng.sample(near, negatives))), name))
    return groups


def _holds(text: str, answers: list[str]) -> bool:
    norm = _norm(text)
    return any(_norm(a) in norm for a in answers)


def _norm(s: str) -> str:
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", s)).lower()


def _shared(question: str, text: str) -> int:
    words = set(re.findall(r"[a-z0-9]{3,}", question.lower())) | {
        question[i : i + 2] for i in range(len(question) - 1) if not question[i].isascii()
    }
    low = text.lower()
    return sum(1 for w in words if w in low)


def iterate(groups: list[Group], seed: int) -> Iterator[Group]:
    """The groups in a fixed shuffled order, over and over."""
    rng = random.Random(seed)
    while True:
        order = list(groups)
        rng.shuffle(order)
        yield from order
