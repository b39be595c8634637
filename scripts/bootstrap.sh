#!/usr/bin/env bash
# Make .venv hold what a requirements file asks for; reinstall only when that file changed.
# Usage: source scripts/bootstrap.sh requirements.txt
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REQ="${1:-requirements.txt}"
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
stamp="$VENV/.installed-$(basename "$REQ")"
want="$(cat "$ROOT/requirements.txt" "$ROOT/$REQ" | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "installing $REQ into .venv" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$ROOT/$REQ" >&2
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
