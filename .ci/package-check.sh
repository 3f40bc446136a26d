#!/usr/bin/env bash
# Checks what the Hex package ships: copies exactly the files mix.exs lists into a temporary
# directory and builds the NIF from that copy with cargo, offline, as a forced build
# (HEXAGON_TPU_BUILD=1) on a user's machine would, with no edit to any file. Fails if the
# package would ship qnn_sim, qnn_tests or a `tests/` directory (unit tests inside `src/` ship, as
# cargo packages do), if its Cargo workspace is not exactly
# the NIF crate, `qnn` and `qnn_sys`, if the NIF does not build from it, or if that NIF has the
# test-support NIF (`qnn_sim_counters`, cargo feature `test-support`).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# shellcheck source=.ci/lib.sh
source .ci/lib.sh

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
stage_package "$stage"

shipped_tests() {
  find "$stage" -path '*qnn_sim*' -o -path '*qnn_tests*' -o -path '*/tests/*' -o -name '*_test.exs'
}
if shipped_tests | grep -q .; then
  echo "package-check: the package would ship qnn_sim, qnn_tests or tests:" >&2
  shipped_tests >&2
  exit 1
fi

crate="$stage/native/hexagon_tpu_nif"
members=$(cd "$crate" && cargo metadata --format-version 1 --no-deps --offline |
  python3 -c 'import json, sys; print(" ".join(sorted(p["name"] for p in json.load(sys.stdin)["packages"])))')
echo "the package's Cargo workspace: $members"
if [[ "$members" != "hexagon_tpu_nif qnn qnn_sys" ]]; then
  echo "package-check: the package's Cargo workspace should be exactly hexagon_tpu_nif, qnn and qnn_sys" >&2
  exit 1
fi

echo "building the NIF from the package's files (cargo build --release --offline)"
out="$root/native/hexagon_tpu_nif/target/package-check"
(cd "$crate" && CARGO_TARGET_DIR="$out" cargo build --release --offline -p hexagon_tpu_nif)
bash .ci/release-dry-run.sh check-nif "$out/release/libhexagon_tpu_nif.so"
echo "package-check: the NIF builds from the package's files as they are, without test support"
