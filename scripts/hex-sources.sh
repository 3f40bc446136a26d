#!/usr/bin/env bash
# Prints the folder that holds Hex packages as sources (one folder per package, as
# ../shared/hex; see guides/developing.md, "Build modes"): $HEXAGON_TPU_HEX_SOURCES, else
# ../shared/hex beside the checkout, else beside the repository it was cloned from (CI runs on
# a clone in a temporary folder). The first that holds every PACKAGE named wins; exits 1 when
# none does.
#
#   bash scripts/hex-sources.sh nimble_options
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
candidates=("${HEXAGON_TPU_HEX_SOURCES:-}" "$root/../shared/hex")
origin="$(git -C "$root" remote get-url origin 2>/dev/null || true)"
origin="${origin#file://}"
[ -d "$origin" ] && candidates+=("$origin/../shared/hex")
for candidate in "${candidates[@]}"; do
  [ -n "$candidate" ] && [ -d "$candidate" ] || continue
  for package in "$@"; do
    [ -d "$candidate/$package" ] || continue 2
  done
  (cd "$candidate" && pwd)
  exit 0
done
exit 1
