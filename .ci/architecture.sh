#!/usr/bin/env bash
# The rules ARCHITECTURE.md states, checked: each prints the offending lines and fails.
#   1. unsafe code lives only in the qnn crate and in qnn_sim (which implements QNN's C side);
#   2. qnn_sim uses nothing of qnn but qnn::sys, so it stays an independent oracle of QNN's
#      behaviour (a misunderstanding in qnn's runtime code cannot leak into the backend that
#      tests it);
#   3. qnn knows neither rustler nor Nx (it is a plain Rust crate that cargo test can link);
#   5. (rule 4, nothing of Qualcomm's, has no check here) test support does not ship: qnn does not depend on qnn_sim (its tests are qnn_tests),
#      and qnn::sim_probe / the NIF's sim_probe compile only with the feature test-support.
set -euo pipefail
cd "$(dirname "$0")/../native/hexagon_tpu_nif"

failed=0
rule() { # DESCRIPTION FOUND: fails when FOUND (the offending lines) is not empty
  local found="$2"
  if [ -n "$found" ]; then
    printf 'rule broken: %s\n%s\n' "$1" "$found" >&2
    failed=1
  else
    printf 'ok: %s\n' "$1"
  fi
}

rule "no unsafe in the NIF crate (src/)" "$(grep -rn --include='*.rs' -E '\bunsafe\b' src || true)"

# Any path into qnn other than qnn::sys: `qnn::x`, `use qnn::{...}`, `use qnn;`, `qnn as`.
rule "qnn_sim uses only qnn::sys" "$(
  grep -rn --include='*.rs' -E '\bqnn::' qnn_sim/src | grep -vE '\bqnn::sys\b' || true
  grep -rn --include='*.rs' -E '\buse qnn(;| as |::\{)' qnn_sim/src || true
  grep -rn --include='*.rs' -E '\bqnn::sys::\{?[^}]*\b(super|crate)\b' qnn_sim/src || true
)"

rule "qnn knows neither rustler nor Nx" "$(
  grep -nE '^\s*rustler' qnn/Cargo.toml || true
  grep -rn --include='*.rs' -E '\brustler\b|\bNx\b|\bnx_' qnn/src || true
)"

rule "qnn does not depend on qnn_sim (its integration tests are the qnn_tests crate)" "$(
  grep -n 'qnn_sim' qnn/Cargo.toml | grep -v '^[0-9]*:\s*#' || true
)"

# Each `mod sim_probe;` must sit right under `#[cfg(feature = "test-support")]`.
rule "sim_probe only with the cargo feature test-support" "$(
  awk '/^[[:space:]]*(pub )?mod sim_probe;/ && prev !~ /^[[:space:]]*#\[cfg\(feature = "test-support"\)\]/ {
    print FILENAME ":" FNR ": " $0
  } { prev = $0 }' qnn/src/lib.rs src/lib.rs
)"

exit "$failed"
