#!/usr/bin/env bash
# Run the bot on the embedded default (no keys needed): installs what it needs, then `python app.py`.
set -euo pipefail
cd "$(dirname "$0")"
source tools/bootstrap.sh requirements.lock
# The Web Chat bundle for /chat (npm ci, skipped once installed); the bot starts even if this fails.
tools/webchat_install.sh || echo "warning: Web Chat bundle not installed; /chat will say how to fix it" >&2
exec python app.py "$@"
