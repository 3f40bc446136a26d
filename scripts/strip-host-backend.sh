#!/usr/bin/env bash
# Makes the Rust workspace in DIR (a checkout, or a copy of the Hex package's files) build
# without the host QNN backend, which the Hex package does not ship: drops `qnn_sim` from the
# workspace members and the `qnn` crate's dev-dependency on it. The release workflow runs this
# on its checkout just before `mix hex.publish`; .ci/package-check.sh proves the result builds.
#
#   scripts/strip-host-backend.sh DIR
set -euo pipefail

dir="${1:?usage: scripts/strip-host-backend.sh DIR}"
workspace="$dir/native/hexagon_tpu_nif/Cargo.toml"
qnn="$dir/native/hexagon_tpu_nif/qnn/Cargo.toml"

replace() { # FILE FROM TO: exactly one line must match FROM
  local file="$1" from="$2" to="$3"
  local count
  count=$(grep -cxF -- "$from" "$file" || true)
  if [[ "$count" != 1 ]]; then
    echo "strip-host-backend: expected one line '$from' in $file, found $count" >&2
    exit 1
  fi
  FROM="$from" TO="$to" perl -0pi -e 's/^\Q$ENV{FROM}\E$/$ENV{TO}/m' "$file"
}

replace "$workspace" 'members = [".", "qnn", "qnn_sim"]' 'members = [".", "qnn"]'
replace "$qnn" 'qnn_sim = { path = "../qnn_sim" }' ''
replace "$qnn" '[dev-dependencies]' ''
echo "stripped the host backend from $dir/native/hexagon_tpu_nif"
