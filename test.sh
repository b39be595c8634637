#!/usr/bin/env bash
# Lint, type-check and test: installs the dev requirements, then ruff, mypy and pytest.
set -euo pipefail
cd "$(dirname "$0")"
source scripts/bootstrap.sh requirements-dev.txt
echo "== ruff check" && ruff check .
echo "== ruff format --check" && ruff format --check .
echo "== mypy" && mypy
echo "== pytest" && python -m pytest "$@"
