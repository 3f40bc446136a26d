#!/usr/bin/env bash
# Builds the release NIF and qnn_sim (the simulated QNN backend), then runs the benchmarks
# that print figures:
#   bench/scheduling.exs        a fast model's latency while a slow one is saturated, and VM ping
#   qnn_tests example load_rss  peak RSS a load adds, against the file's size
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
crate="$root/native/hexagon_tpu_nif"
target="${CARGO_TARGET_DIR:-$crate/target}"
(cd "$crate" && cargo build --release -p hexagon_tpu_nif -p qnn_sim)
"$root/scripts/install-native.sh" "$target/release"
cd "$root"
echo "==> scheduling"
HEXAGON_TPU_OFFLINE=1 mix run bench/scheduling.exs "$root/priv/native/qnn-sim-build" "$root/priv/native/libqnn_sim.so"
echo "==> peak RSS per load"
(cd "$crate" && cargo run --release -q -p qnn_tests --example load_rss)
