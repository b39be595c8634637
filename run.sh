#!/usr/bin/env bash
# Run the bot on the embedded default (no keys needed): installs what it needs, then `python app.py`.
set -euo pipefail
cd "$(dirname "$0")"
source scripts/bootstrap.sh requirements.txt
exec python app.py "$@"
