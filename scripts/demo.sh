#!/usr/bin/env bash
# The demo, on a host without QNN, an NPU or Hex: builds the NIF and the host QNN backend
# (release), makes a small quantized classifier with the backend's model builder, loads it,
# predicts, and prints the outputs, the timings and HexagonTpu.Stats.native/0.
#
# Needs cargo (Rust >= 1.91) and Elixir >= 1.14, as scripts/test.sh does.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
crate="$root/native/hexagon_tpu_nif"
target="${CARGO_TARGET_DIR:-$crate/target}"

for tool in cargo mix; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "scripts/demo.sh: '$tool' not found; install Rust (rustup) and Elixir (apt-get install elixir erlang-dev)" >&2
    exit 1
  fi
done

echo "==> cargo build --release (the NIF, the host QNN backend and its model builder)"
(cd "$crate" && cargo build --release -p hexagon_tpu_nif -p qnn_sim)
"$root/scripts/install-native.sh" "$target/release"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "==> building the model: examples/pattern_classifier.json"
"$root/priv/native/qnn-sim-build" "$root/examples/pattern_classifier.json" -o "$work/pattern_classifier.bin"

echo "==> mix run examples/demo.exs (offline)"
cd "$root"
export HEXAGON_TPU_OFFLINE=1
mix run examples/demo.exs "$work/pattern_classifier.bin" "$root/priv/native/libqnn_sim.so"
