#!/usr/bin/env bash
# Install the Web Chat bundle into webchat/node_modules (`npm ci`), only when not yet installed or
# when webchat/package-lock.json changed since. Usage: tools/webchat_install.sh [--required]
# Without npm it warns and exits 0 (the bot works; /chat says how to install), unless --required (CI).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/tools/npm_ci_once.sh"
BUNDLE="$ROOT/webchat/node_modules/botframework-webchat/dist/webchat.js"
if [ -f "$BUNDLE" ] && npm_installed_from_lock webchat; then
  exit 0
fi
# No install script runs (npm_ci_stamped): the bundle ships prebuilt, so none needs to.
npm_ci_stamped webchat "the Web Chat bundle" "Node.js 18 or later for Web Chat (/chat)" "${1:-}"
