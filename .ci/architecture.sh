#!/usr/bin/env bash
# The rules ARCHITECTURE.md states, checked: each prints the offending lines and fails.
# (numbered as in ARCHITECTURE.md's "Rules")
#   (and for the NIF crate: no unsafe, no import circle, no hand-built {:ok, _} / {:error, _})
#   1. unsafe code lives only in the qnn and qnn_sys crates, in qnn_sim (which implements
#      QNN's C side) and in its test-only companions qnn_fake_rpcmem and qnn_tests;
#   2. qnn_sim uses nothing of qnn but the ABI, so it stays an independent oracle of QNN's
#      behaviour (a misunderstanding in qnn's runtime code cannot leak into the backend that
#      tests it): it depends on the qnn_sys crate alone, and Cargo refuses any other path;
#   3. qnn's layers point one way: base → observe → ffi → model → exec → tools (qnn/src/lib.rs).
#      A module names crate paths by layer (`crate::<layer>::…`, `crate::sys`), never a root
#      re-export, and never a layer above its own; no files import each other in a circle,
#      in qnn and in qnn_sim (.ci/import_cycles.py: every `.rs` file a node, an edge for each
#      `use` and each `crate::`/`super::`/`self::`/child-module path, re-exports followed to
#      the defining file; a file and a child module it declares may import each other, no
#      longer circle through that pair is allowed);
#   4. qnn knows neither rustler nor Nx (it is a plain Rust crate that cargo test can link);
#   6. (rule 5, nothing of Qualcomm's, has no check here) test support does not ship: qnn does
#      not depend on qnn_sim (its tests are qnn_tests), and qnn::sim_probe / the NIF's
#      sim_probe compile only with the feature test-support.
#   7. a call into QNN is made by its one checked function (qnn/src/ffi/calls/): outside ffi no
#      module reads the function tables (`.fns.`); outside ffi/calls/ none calls QNN for a raw
#      status (`Status(unsafe …)`) or takes the exit permit (`exit::enter()`), but for the
#      loader (dlopen and getProviders, before a library has a table) and the execute's
#      accounting (exec/graph.rs's ExecuteCall, which holds the permit across graphExecute and
#      the submission).
#   8. no source file over 700 lines (tests and test support aside).
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
rule "no files of the NIF crate import each other in a circle" "$(python3 ../../.ci/import_cycles.py src)"
# The protocol (src/protocol.rs, src/terms.rs, src/error.rs): NIFs return typed values, and
# rustler encodes `{:ok, _}` / `{:error, _}`.
rule "no NIF builds {:ok, _} or {:error, _} by hand (return Result<T, Failure> or Done)" "$(
  grep -rn --include='*.rs' -E '\(atoms::(ok|error)\(\),' src || true
)"

# Cargo enforces the rule once qnn_sim cannot name qnn: its manifest lists qnn_sys and not qnn.
rule "qnn_sim depends on qnn_sys, not on qnn" "$(
  grep -qE '^qnn_sys\s*=' qnn_sim/Cargo.toml || echo "qnn_sim/Cargo.toml: no qnn_sys dependency"
  grep -nE '^qnn\s*=|^\[(dev-|build-)?dependencies\.qnn\]' qnn_sim/Cargo.toml | sed 's|^|qnn_sim/Cargo.toml:|' || true
)"

# Layers, lowest first. In qnn/src/<layer>/, every `crate::` path (outside comments) starts
# with a layer no higher than the file's own or `sys` (the qnn_sys crate); `super::super` (a
# way around the rule) is refused outright.
layers=(base observe ffi model exec tools)
layer_violations() {
  local i j lower higher allowed
  for i in "${!layers[@]}"; do
    lower=${layers[$i]}
    allowed="sys"
    for ((j = 0; j <= i; j++)); do allowed="$allowed|${layers[$j]}"; done
    higher=""
    for ((j = i + 1; j < ${#layers[@]}; j++)); do higher="$higher ${layers[$j]}"; done
    [ -d "qnn/src/$lower" ] || { echo "qnn/src/$lower: no such layer"; continue; }
    # Strip `//` comments, then look at every crate:: path and every `super::super`.
    grep -rn --include='*.rs' -E 'crate::|super::super' "qnn/src/$lower" |
      sed -E 's#^([^:]+:[0-9]+:)(.*)$#\1\t\2#' |
      awk -F'\t' -v allowed="^($allowed)$" -v lower="$lower" -v higher="$higher" '
        { code = $2; sub(/\/\/.*/, "", code) }
        code ~ /super::super/ { print $1 " " $2 "   <- super::super out of layer " lower; next }
        {
          rest = code
          while (match(rest, /crate::(\{|[A-Za-z_][A-Za-z0-9_]*)/)) {
            first = substr(rest, RSTART + 7, RLENGTH - 7)
            rest = substr(rest, RSTART + RLENGTH)
            if (first == "{") { print $1 " " $2 "   <- name the layer: crate::<layer>::…"; break }
            if (first !~ allowed) {
              why = index(" " higher " ", " " first " ") ? "layer " first " is above " lower : "crate::" first " is not a layer path"
              print $1 " " $2 "   <- " why
              break
            }
          }
        }'
  done
}
rule "qnn's layers import only downward (base → observe → ffi → model → exec → tools)" "$(layer_violations)"

# Per file (.ci/import_cycles.py states what an edge is): a parent and the child it declares
# may import each other, no longer circle is allowed.
rule "no files of qnn import each other in a circle" "$(python3 ../../.ci/import_cycles.py qnn/src)"
rule "no files of qnn_sim import each other in a circle" "$(python3 ../../.ci/import_cycles.py qnn_sim/src)"

rule "no module of qnn/src outside a layer but lib.rs" "$(
  find qnn/src -maxdepth 1 -name '*.rs' ! -name lib.rs | sed 's/$/: not in a layer/'
  find qnn/src -mindepth 1 -maxdepth 1 -type d | grep -vE '/(base|observe|ffi|model|exec|tools)$' | sed 's/$/: not a layer/' || true
)"

rule "qnn knows neither rustler nor Nx" "$(
  grep -nE '^\s*rustler' qnn/Cargo.toml || true
  grep -rn --include='*.rs' -E '\brustler\b|\bNx\b|\bnx_' qnn/src || true
)"

rule "qnn does not depend on qnn_sim (its integration tests are the qnn_tests crate)" "$(
  grep -n 'qnn_sim' qnn/Cargo.toml | grep -v '^[0-9]*:\s*#' || true
)"

rule "calls into QNN only through ffi/calls/ (the loader and ExecuteCall's permit aside)" "$(
  grep -rn --include='*.rs' -F '.fns.' qnn/src | grep -v '^qnn/src/ffi/' || true
  grep -rn --include='*.rs' -E 'Status\(unsafe|exit::enter\(\)' qnn/src |
    grep -vE '^qnn/src/ffi/(calls/|loader\.rs:)' |
    grep -vE '^qnn/src/exec/graph\.rs:[0-9]+:\s*in_qnn: crate::base::exit::enter\(\)\?,$' || true
)"

# Each `mod sim_probe;` must sit right under `#[cfg(feature = "test-support")]`.
rule "sim_probe only with the cargo feature test-support" "$(
  awk '/^[[:space:]]*(pub )?mod sim_probe;/ && prev !~ /^[[:space:]]*#\[cfg\(feature = "test-support"\)\]/ {
    print FILENAME ":" FNR ": " $0
  } { prev = $0 }' qnn/src/tools/mod.rs qnn/src/lib.rs src/lib.rs
)"

# Tests and test support are exempt; the rest (benchmarks, examples and fuzz targets too) is code.
rule "no source file over 700 lines" "$(
  cd ../.. && git ls-files '*.rs' '*.ex' '*.exs' '*.py' '*.sh' .ci/run |
    grep -vE '(^|/)tests?/|_test\.exs$|(^|/)tests?\.rs$|_tests\.rs$|/test_[^/]*$' |
    while IFS= read -r file; do
      lines=$(wc -l <"$file")
      [ "$lines" -le 700 ] || echo "$file: $lines lines"
    done
)"

exit "$failed"
