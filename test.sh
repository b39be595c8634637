#!/usr/bin/env bash
# Lint, check the declared dependencies, type-check and test: installs requirements-dev.lock, then ruff,
# deptry, mypy and pytest.
set -euo pipefail
cd "$(dirname "$0")"
source tools/bootstrap.sh requirements-dev.lock
echo "== ruff check" && ruff check .
echo "== ruff format --check" && ruff format --check .
# The package ([tool.deptry]): every import declared in requirements.txt, every pin there used, no dev
# package imported. Then tests/ and tools/ (not in the wheel, so excluded by the config): everything they
# import is declared, in requirements.txt or requirements-dev.txt.
first_party=(-kf app -kf bot -kf dialogs -kf cards -kf webchat -kf admin -kf hosting -kf feedback -kf crag -kf tests -kf tools)
echo "== deptry" && deptry . \
  && deptry tests tools --exclude '\.venv' --extend-exclude '.*/node_modules' "${first_party[@]}" --ignore DEP002,DEP004
echo "== mypy" && mypy
echo "== pytest" && python -m pytest "$@"
