#!/usr/bin/env bash
# Builds the release NIF and qnn_sim (the simulated QNN backend), then runs the benchmarks
# that print figures:
#   bench/scheduling.exs        a fast model's latency while a slow one is saturated, and VM ping
#   qnn_tests example load_rss  peak RSS a load adds, against the file's size
#
# `bench/run.sh kernels` runs only the host kernels' table instead: each quantize, dequantize
# and f16 conversion of the `qnn` crate next to memcpy and ONNX Runtime's QuantizeLinear /
# DequantizeLinear / Cast (one thread, io_binding), interleaved in one run (bench/kernels.py).
# Its Python is $HEXAGON_TPU_BENCH_PYTHON, else the pinned QNN venv's (scripts/setup.sh makes
# it); it needs onnxruntime, onnx and numpy.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
crate="$root/native/hexagon_tpu_nif"
target="${CARGO_TARGET_DIR:-$crate/target}"
if [ "${1:-}" = kernels ]; then
  shift
  python="${HEXAGON_TPU_BENCH_PYTHON:-}"
  if [ -z "$python" ]; then
    for candidate in "${XDG_CACHE_HOME:-$HOME/.cache}"/hexagon_tpu/venv-ort-qnn-*/bin/python; do
      [ -x "$candidate" ] && python="$candidate"
    done
  fi
  if [ -z "$python" ]; then
    echo "bench/run.sh kernels: no Python with onnxruntime; run scripts/setup.sh or set HEXAGON_TPU_BENCH_PYTHON" >&2
    exit 1
  fi
  (cd "$crate" && cargo build --release -q -p qnn --example quant_bench)
  exec "$python" "$root/bench/kernels.py" "$target/release/examples/quant_bench" "$@"
fi
(cd "$crate" && cargo build --release -p hexagon_tpu_nif -p qnn_sim)
"$root/scripts/install-native.sh" "$target/release"
cd "$root"
echo "==> scheduling"
HEXAGON_TPU_OFFLINE=1 mix run bench/scheduling.exs "$root/priv/native/qnn-sim-build" "$root/priv/native/libqnn_sim.so"
echo "==> peak RSS per load"
(cd "$crate" && cargo run --release -q -p qnn_tests --example load_rss)
