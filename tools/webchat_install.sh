#!/usr/bin/env bash
# Install the Web Chat bundle into webchat/node_modules (`npm ci`), only when not yet installed or
# when webchat/package-lock.json changed since. Usage: tools/webchat_install.sh [--required]
# Without npm it warns and exits 0 (the bot works; /chat says how to install), unless --required (CI).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/webchat"
BUNDLE="$DIR/node_modules/botframework-webchat/dist/webchat.js"
STAMP="$DIR/node_modules/.installed-lock"
want="$(sha256sum "$DIR/package-lock.json" | cut -d' ' -f1)"
if [ -f "$BUNDLE" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  message="npm not found: install Node.js 18 or later for Web Chat (/chat)"
  if [ "${1:-}" = "--required" ]; then
    echo "error: $message" >&2
    exit 1
  fi
  echo "warning: $message" >&2
  exit 0
fi
echo "installing the Web Chat bundle into webchat/node_modules (npm ci)" >&2
# --ignore-scripts: the bundle ships prebuilt, so no package's install script needs to run.
(cd "$DIR" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
echo "$want" > "$STAMP"
