# shellcheck shell=bash
# Sourced by tools/webchat_install.sh and tools/test_servers_install.sh, which each install a folder's
# npm packages from its package-lock.json. `npm ci` runs only when the folder was not installed yet or
# its lock changed since: the hash of the lock installed is kept in node_modules/.installed-lock.
# FOLDER below is relative to the repository's root.

NPM_CI_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# npm_lock_hash FOLDER: the hash of its package-lock.json, as the stamp keeps it.
npm_lock_hash() {
  sha256sum "$NPM_CI_ROOT/$1/package-lock.json" | cut -d' ' -f1
}

# npm_installed_from_lock FOLDER: true when its node_modules was installed from its lock as it is now.
npm_installed_from_lock() {
  local stamp="$NPM_CI_ROOT/$1/node_modules/.installed-lock"
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(npm_lock_hash "$1")" ]
}

# npm_ci_stamped FOLDER WHAT NODE_HINT [--required]: `npm ci --ignore-scripts` in FOLDER, then the
# stamp (each caller says why its packages need no install script). Without npm it ends the script:
# with a warning and status 0 (what needs the packages skips or says how to install them), or, with
# --required (CI), an error and status 1.
npm_ci_stamped() {
  local folder="$1" what="$2" hint="$3" required="${4:-}" want message
  want="$(npm_lock_hash "$folder")"
  if ! command -v npm >/dev/null 2>&1; then
    message="npm not found: install $hint"
    if [ "$required" = "--required" ]; then
      echo "error: $message" >&2
      exit 1
    fi
    echo "warning: $message" >&2
    exit 0
  fi
  echo "installing $what into $folder/node_modules (npm ci)" >&2
  (cd "$NPM_CI_ROOT/$folder" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
  echo "$want" > "$NPM_CI_ROOT/$folder/node_modules/.installed-lock"
}
