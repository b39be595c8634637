"""python -m feedback [--store sqlite|postgres] [--db FILE] export [--format csv|jsonl] [--out FILE]
[--unattributed]
python -m feedback [--store sqlite|postgres] [--db FILE] stats [--json]
python -m feedback --store postgres migrate [--grant ROLE [--object-id OID]]
python -m feedback [--store sqlite|postgres] [--db FILE] to-eval [--down] [--refused] --out DIR
[--corpus DIR]

Reads the feedback database the bot writes, so it is safe while the bot runs: the SQLite file
(CRAG_FEEDBACK_DB, default data/feedback.sqlite3, opened read-only) or, with --store postgres or
CRAG_FEEDBACK_STORE=postgres, the PostgreSQL database of CRAG_POSTGRES_URL (from the environment or .env
only: a password on the command line would show in the process list). The settings are read as the bot
reads them, from the environment and .env, so the CLI finds the store the bot writes to. `migrate`
brings the schema up to date (the bot also does it at start, unless CRAG_POSTGRES_MIGRATE=false); with
--grant it also makes the bot's own role, limited to the feedback tables (feedback/postgres_roles.py),
as Azure's migration job does with the bot identity's object id. `to-eval` turns rated-down and refused
answers into an evaluation set for `python -m crag.cli.eval` (feedback/to_eval.py). Ratings that named
no answer the store knows (feedback/protocol.py, `record_unattributed`) are counted by `stats` on a line
of their own and exported with `export --unattributed`: acknowledged to the user, they are never left
out of what an operator reads. Installed as a package: `crag-feedback`.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import sqlite3
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TextIO

from pydantic import Field, SecretStr, ValidationError

from crag.config.engine_settings import REPO_ROOT
from crag.config.env import EnvSettings
from crag.config.paths import SAMPLE_DOCS
from feedback.protocol import UNATTRIBUTED_FIELDS
from hosting import redact


class FeedbackCliSettings(EnvSettings):
    """The bot's settings the CLI needs, read the same way (environment, then .env)."""

    store: Literal["sqlite", "postgres"] = Field(default="sqlite", alias="CRAG_FEEDBACK_STORE")
    db: Path = Field(default=REPO_ROOT / "data" / "feedback.sqlite3", alias="CRAG_FEEDBACK_DB")
    postgres_url: SecretStr = Field(default=SecretStr(""), alias="CRAG_POSTGRES_URL")
    postgres_auth: Literal["password", "entra"] = Field(default="password", alias="CRAG_POSTGRES_AUTH")
    docs_dir: Path = Field(default=SAMPLE_DOCS, alias="CRAG_DOCS_DIR")


_settings: FeedbackCliSettings | None = None


def settings() -> FeedbackCliSettings:
    global _settings
    if _settings is None:
        _settings = FeedbackCliSettings()
    return _settings


COLUMNS = [
    "id",
    "created_at",
    "updated_at",
    "result_id",
    "reaction",
    "comment",
    "source",
    "question",
    "answer",
    "branch",
    "cited_files",
    "conversation_id",
    "user_id",
    "channel_id",
]
# What export --unattributed writes: every stored field (the admin page reads fewer, records.py).
UNATTRIBUTED_EXPORT_COLUMNS = ["id", *UNATTRIBUTED_FIELDS]
# What stats calls the ratings that named no known answer, beside the branches of those that did.
UNATTRIBUTED = "unattributed"


def default_db() -> Path:
    return settings().db


def read_sqlite_rows(
    db: Path, table: str = "answer_feedback", columns: list[str] = COLUMNS
) -> list[dict[str, Any]]:
    if not db.is_file():
        raise FileNotFoundError(f"feedback database not found: {db}")
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY id")]
    finally:
        conn.close()


def read_rows(store: str, db: Path) -> list[dict[str, Any]]:
    if store == "postgres":
        from feedback.postgres_store import read_rows as read_postgres_rows

        return asyncio.run(read_postgres_rows(postgres_url(), COLUMNS, entra()))
    return read_sqlite_rows(db)


def read_unattributed(store: str, db: Path) -> list[dict[str, Any]]:
    """The ratings kept apart because they named no known answer, oldest first; none in a database
    made before the bot kept them (its table is added when the bot next opens the store)."""
    if store == "postgres":
        from feedback.postgres_store import read_unattributed as read_postgres_unattributed

        return asyncio.run(read_postgres_unattributed(postgres_url(), UNATTRIBUTED_EXPORT_COLUMNS, entra()))
    try:
        return read_sqlite_rows(db, "unattributed_feedback", UNATTRIBUTED_EXPORT_COLUMNS)
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise


def postgres_url() -> str:
    return settings().postgres_url.get_secret_value()


def entra() -> bool:
    """CRAG_POSTGRES_AUTH=entra: log in with the identity's token (in Azure, as the bot does)."""
    return settings().postgres_auth == "entra"


def migrate(store: str, db: Path, grant: str = "", object_id: str = "") -> str:
    """Bring the schema up to date (and, with grant, give the bot's role its rights); returns what
    was done, in words."""
    if store == "postgres":
        from feedback.postgres_store import migrate_database

        applied, version = asyncio.run(migrate_database(postgres_url(), entra(), grant, object_id))
        done = f"applied {', '.join(map(str, applied))}" if applied else "nothing to apply"
        granted = f"; {grant} may read and write the feedback tables only" if grant else ""
        return f"feedback schema at version {version} ({done}){granted}"
    if grant:
        raise ValueError("--grant is for --store postgres (SQLite has no roles)")
    from feedback.sqlite_store import FeedbackStore

    async def create() -> None:
        store = FeedbackStore(db)
        await store.open()
        await store.close()

    asyncio.run(create())
    return f"feedback schema of {db} up to date"


# A spreadsheet runs a cell that starts with one of these as a formula (=HYPERLINK(…), +cmd|…, @SUM(…));
# OWASP's CSV-injection advice: prefix such cells with a single quote so they are shown as text.
# defusedcsv would not do: it leaves tab and carriage return alone and rewrites "|" inside the text.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A cell safe to open in a spreadsheet: text starting like a formula gets a leading quote."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def export(rows: list[dict[str, Any]], fmt: str, out: TextIO, columns: list[str] = COLUMNS) -> None:
    if fmt == "jsonl":
        for row in rows:
            if "cited_files" in row:
                row = {**row, "cited_files": json.loads(row["cited_files"] or "[]")}
            out.write(json.dumps(row, ensure_ascii=False))
            out.write("\n")
        return
    writer = csv.DictWriter(out, fieldnames=columns)
    writer.writeheader()
    writer.writerows({key: csv_cell(value) for key, value in row.items()} for row in rows)


def stats(
    rows: list[dict[str, Any]], unattributed: Sequence[dict[str, Any]] = ()
) -> dict[str, dict[str, dict[str, int]]]:
    """Likes and dislikes by branch and by day; the ratings that named no known answer are counted
    by their day and, having no branch, on a line of their own (UNATTRIBUTED)."""
    by_branch: dict[str, Counter[str]] = {}
    by_day: dict[str, Counter[str]] = {}
    for row in rows:
        by_branch.setdefault(row["branch"], Counter())[row["reaction"]] += 1
        by_day.setdefault(row["updated_at"][:10], Counter())[row["reaction"]] += 1
    for row in unattributed:
        by_branch.setdefault(UNATTRIBUTED, Counter())[row["reaction"]] += 1
        by_day.setdefault(row["created_at"][:10], Counter())[row["reaction"]] += 1
    as_dict = {
        "by_branch": {k: {"up": v["up"], "down": v["down"]} for k, v in sorted(by_branch.items())},
        "by_day": {k: {"up": v["up"], "down": v["down"]} for k, v in sorted(by_day.items())},
    }
    return as_dict


def print_stats(summary: dict[str, dict[str, dict[str, int]]], out: TextIO) -> None:
    for title, key in (("branch", "by_branch"), ("day", "by_day")):
        out.write(f"{title:<12} {'👍':>6} {'👎':>6} {'share 👍':>9}\n")
        for name, counts in summary[key].items():
            total = counts["up"] + counts["down"]
            share = counts["up"] / total if total else 0.0
            out.write(f"{name:<12} {counts['up']:>6} {counts['down']:>6} {share:>9.0%}\n")
        out.write("\n")
    if UNATTRIBUTED in summary["by_branch"]:
        out.write(f"{UNATTRIBUTED}: ratings that named no answer the store knows (export --unattributed)\n")


def _safe(exc: BaseException) -> str:
    """The error's message, without the DSN or its password should a driver quote them."""
    text = str(exc) or type(exc).__name__
    return redact.RedactingFilter(redact.url_secrets(postgres_url())).redact(text)


def default_docs() -> Path:
    return settings().docs_dir


def to_eval(store: str, db: Path, down: bool, refused: bool, corpus: Path, out: Path) -> str:
    """Write the evaluation set; returns what was done, in words."""
    from feedback import to_eval as exporter

    if store == "postgres":
        flagged = asyncio.run(exporter.read_postgres(postgres_url(), down, refused, entra()))
    else:
        flagged = exporter.read_sqlite(db, down, refused)
    chosen = " or ".join(n for n, on in (("rated down", down), ("refused", refused)) if on)
    if not flagged:
        return f"no {chosen} answers: nothing written"
    questions = exporter.export(flagged, corpus, out)
    return (
        f"{len(questions)} questions ({len(flagged)} {chosen} answers) written to {out}/questions.jsonl "
        f"with a copy of {corpus}: write their answers, then run python -m crag.cli.eval {out} --out RUN"
    )


def main(argv: list[str] | None = None, prog: str = "python -m feedback") -> int:
    global _settings
    try:
        # Read afresh on every call, as the commands below read it (default_db, postgres_url, ...).
        _settings = config = FeedbackCliSettings()
    except ValidationError as exc:  # names the bad setting and why, never its value
        bad = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        print(f"invalid settings: {bad}", file=sys.stderr)
        return 2
    args = _parser(prog, config.store).parse_args(argv)
    try:
        if args.command in ("migrate", "to-eval"):
            print(_change(args), file=sys.stderr)
            return 0
        db = args.db or default_db()
        apart = args.command == "stats" or args.unattributed
        rows = [] if args.command == "export" and args.unattributed else read_rows(args.store, db)
        unattributed = read_unattributed(args.store, db) if apart else []
    except Exception as exc:  # unreachable server, missing file, no schema, bad setting
        print(f"error: {_safe(exc)}", file=sys.stderr)
        return 2
    if args.command == "export":
        if args.unattributed:
            _export_to(
                unattributed, args.format, args.out, UNATTRIBUTED_EXPORT_COLUMNS, "unattributed ratings"
            )
        else:
            _export_to(rows, args.format, args.out)
        return 0
    summary = stats(rows, unattributed)
    if args.json:
        print(json.dumps(summary, ensure_ascii=False, indent=1))
    else:
        print_stats(summary, sys.stdout)
    return 0


def _parser(prog: str, store: str) -> argparse.ArgumentParser:
    """The command line: the store's options, then one subcommand."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[1])
    parser.add_argument(
        "--store",
        choices=("sqlite", "postgres"),
        default=store,
        help="where the feedback is (default CRAG_FEEDBACK_STORE, else sqlite)",
    )
    parser.add_argument("--db", type=Path, default=None, help="SQLite file (default CRAG_FEEDBACK_DB)")
    commands = parser.add_subparsers(dest="command", required=True)
    exp = commands.add_parser("export", help="every rating, as CSV or JSON lines")
    exp.add_argument("--format", choices=("csv", "jsonl"), default="csv")
    exp.add_argument("--out", type=Path, default=None, help="file to write (default: standard output)")
    exp.add_argument(
        "--unattributed",
        action="store_true",
        help="the ratings that named no answer the store knows, instead (they have no question or answer)",
    )
    st = commands.add_parser("stats", help="likes and dislikes by branch and by day")
    st.add_argument("--json", action="store_true", help="machine-readable output")
    mig = commands.add_parser("migrate", help="bring the database's schema up to date")
    mig.add_argument(
        "--grant", default="", metavar="ROLE", help="the bot's role: made if missing, data rights only"
    )
    mig.add_argument(
        "--object-id",
        default="",
        help="with --grant on Azure: the bot identity's principal id (an Entra role)",
    )
    ev = commands.add_parser(
        "to-eval",
        help="rated-down and refused answers as an evaluation set for python -m crag.cli.eval",
        description="Without --down or --refused, both.",
    )
    ev.add_argument("--down", action="store_true", help="answers rated 👎")
    ev.add_argument("--refused", action="store_true", help="answers that were the 'cannot answer' text")
    ev.add_argument("--out", type=Path, required=True, help="new folder for the evaluation set")
    ev.add_argument(
        "--corpus",
        type=Path,
        default=None,
        help="documents to copy in (default CRAG_DOCS_DIR, else sample_docs)",
    )
    return parser


def _change(args: argparse.Namespace) -> str:
    """Run `migrate` or `to-eval`; returns what was done, in words."""
    if args.command == "migrate":
        return migrate(args.store, args.db or default_db(), args.grant, args.object_id)
    both = not args.down and not args.refused
    return to_eval(
        args.store,
        args.db or default_db(),
        args.down or both,
        args.refused or both,
        args.corpus or default_docs(),
        args.out,
    )


def _export_to(
    rows: list[dict[str, Any]],
    fmt: str,
    out: Path | None,
    columns: list[str] = COLUMNS,
    what: str = "ratings",
) -> None:
    """The ratings to the file `out`, or to standard output."""
    if out:
        with out.open("w", encoding="utf-8", newline="") as f:
            export(rows, fmt, f, columns)
        print(f"exported {len(rows)} {what} to {out}", file=sys.stderr)
    else:
        export(rows, fmt, sys.stdout, columns)


if __name__ == "__main__":
    raise SystemExit(main())
