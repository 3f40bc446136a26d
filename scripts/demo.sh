#!/usr/bin/env bash
# The demo, on a host without QNN, an NPU or Hex: builds the NIF and the host QNN backend
# (release), makes a small quantized classifier with the backend's model builder, loads it,
# predicts, and prints the outputs, the timings and HexagonTpu.Stats.native/0.
#
# Needs cargo (Rust >= 1.91) and Elixir >= 1.14, as scripts/test.sh does.
set -euo pipefail

# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

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
