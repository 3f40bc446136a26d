#!/usr/bin/env bash
# Builds the release NIF and qnn_sim (the simulated QNN backend), then runs the benchmarks
# that print figures:
#   bench/scheduling.exs        a fast model's latency while a slow one is saturated, and VM ping
#   bench/profile.exs           an execute's cost with profiling off, 1 in 100, every execute
#   qnn_tests example load_rss  peak RSS a load adds, against the file's size
#   bench/preprocess.exs        HexagonTpu.Preprocess against the same steps in numpy (and Nx), and OpenCV
#   bench/postprocess.exs       HexagonTpu.Postprocess (YOLOv8n, NMS, SSD, mask, top k) against numpy, NMS against OpenCV
#   bench/throughput.exs        synchronous against asynchronous pipelined throughput, 1 ms executes
#   bench/pipeline.exs          HexagonTpu.Pipeline on camera frames (NV12 preprocessing, a 6 ms
#                               execute, YOLOv8n's post-processing): frames/s against
#                               1 / max(pre, execute, post) and the serial loop
#   bench/shared_buffers.exs    shared against client buffers: bytes copied per predict, the
#                               time of a 640x640x3 predict (qnn_sim over the fake rpcmem)
#
#   bash bench/run.sh                 all of the above, and the kernels' table below first when
#                                     a Python with onnxruntime is found (offline: no Nx)
#   bash bench/run.sh throughput      the throughput comparison only
#   bash bench/run.sh pipeline [FRAMES [SLEEP_MS]]  the camera pipeline only
#   bash bench/run.sh shared-buffers  shared against client buffers only
#   bash bench/run.sh versus-ort [N]  predict/3 against ONNX Runtime's QNN EP on one binary on
#                                     Qualcomm's emulator, interleaved (bench/versus_ort.exs;
#                                     also part of "all" when the QNN venv is there)
#   bash bench/run.sh preprocess      the preprocessing pass only: ours and numpy (offline)
#   bash bench/run.sh postprocess     preprocessing, then postprocessing: ours and numpy
#   bash bench/run.sh preprocess-nx   ours, numpy and Nx in one run, in the Debian 13 root of
#                                     .ci/elixir-1.18.sh (Hex mode: Nx, Elixir 1.18; the NIF is
#                                     Rustler's release build there)
#   bash bench/run.sh kernels         the host kernels' table instead: each quantize,
#                                     dequantize and f16 conversion of the `qnn` crate next to
#                                     memcpy and ONNX Runtime's QuantizeLinear /
#                                     DequantizeLinear / Cast (one thread, io_binding),
#                                     interleaved in one run (bench/kernels.py). Its Python is
#                                     $HEXAGON_TPU_BENCH_PYTHON, else the pinned QNN venv's
#                                     (scripts/setup.sh makes it); it needs onnxruntime, onnx
#                                     and numpy.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
what="${1:-all}"
if [ "$what" = preprocess-nx ]; then
  trixie_label=bench-preprocess
  # shellcheck source=.ci/trixie.sh
  source "$root/.ci/trixie.sh"
  trixie_prepare
  # shellcheck disable=SC2016 # expanded inside the chroot
  trixie_run MIX_ENV=test HEXAGON_TPU_BUILD=1 MIX_BUILD_ROOT="$root/_build/elixir-1.18" -- '
    mix hexagon_tpu.compile --setup >/dev/null
    mix run bench/preprocess.exs
  '
  exit 0
fi
crate="$root/native/hexagon_tpu_nif"
target="${CARGO_TARGET_DIR:-$crate/target}"
python="${HEXAGON_TPU_BENCH_PYTHON:-}"
if [ -z "$python" ]; then
  for candidate in "${XDG_CACHE_HOME:-$HOME/.cache}"/hexagon_tpu/venv-ort-qnn-*/bin/python; do
    [ -x "$candidate" ] && python="$candidate"
  done
fi
kernels() {
  if [ -z "$python" ]; then
    echo "bench/run.sh kernels: no Python with onnxruntime; run scripts/setup.sh or set HEXAGON_TPU_BENCH_PYTHON" >&2
    return 1
  fi
  (cd "$crate" && cargo build --release -q -p qnn --example quant_bench)
  "$python" "$root/bench/kernels.py" "$target/release/examples/quant_bench" "$@"
}
if [ "$what" = kernels ]; then
  shift
  kernels "$@"
  exit
fi
if [ "$what" = all ]; then
  echo "==> host kernels against memcpy and ONNX Runtime"
  kernels || echo "(skipped: no Python with onnxruntime)"
fi
(cd "$crate" && cargo build --release -p hexagon_tpu_nif -p qnn_sim -p qnn_fake_rpcmem)
"$root/scripts/install-native.sh" "$target/release"
cd "$root"
sim=("$root/priv/native/qnn-sim-build" "$root/priv/native/libqnn_sim.so")
if [ "$what" = versus-ort ]; then
  shift
  MIX_ENV=test HEXAGON_TPU_OFFLINE=1 mix run bench/versus_ort.exs "$@"
  exit 0
fi
if [ "$what" = throughput ]; then
  HEXAGON_TPU_OFFLINE=1 mix run bench/throughput.exs "${sim[@]}"
  exit 0
fi
if [ "$what" = pipeline ]; then
  shift
  HEXAGON_TPU_OFFLINE=1 mix run bench/pipeline.exs "${sim[@]}" "$@"
  exit 0
fi
if [ "$what" = shared-buffers ]; then
  HEXAGON_TPU_OFFLINE=1 mix run bench/shared_buffers.exs "${sim[@]}" "$root/priv/native/libqnn_fake_rpcmem.so"
  exit 0
fi
echo "==> preprocessing: a camera frame to a model input"
HEXAGON_TPU_OFFLINE=1 mix run bench/preprocess.exs
[ "$what" != preprocess ] || exit 0
echo "==> postprocessing: YOLOv8n's head, NMS, SSD, a mask and top k"
HEXAGON_TPU_OFFLINE=1 mix run bench/postprocess.exs
[ "$what" != postprocess ] || exit 0
echo "==> scheduling, and predict/3 above graphExecute"
HEXAGON_TPU_OFFLINE=1 mix run bench/scheduling.exs "${sim[@]}"
echo "==> throughput: synchronous against asynchronous, 1 ms executes"
HEXAGON_TPU_OFFLINE=1 mix run bench/throughput.exs "${sim[@]}"
echo "==> a camera pipeline: pre, execute and post overlapped (HexagonTpu.Pipeline)"
HEXAGON_TPU_OFFLINE=1 mix run bench/pipeline.exs "${sim[@]}"
echo "==> shared buffers against client buffers, a 640x640x3 predict"
HEXAGON_TPU_OFFLINE=1 mix run bench/shared_buffers.exs "${sim[@]}" "$root/priv/native/libqnn_fake_rpcmem.so"
echo "==> profiling: off, profile_every: 100, every execute"
HEXAGON_TPU_OFFLINE=1 mix run bench/profile.exs "${sim[@]}"
if [ -n "$python" ]; then
  echo "==> predict/3 against ONNX Runtime on the same binary, on Qualcomm's HTP emulator"
  MIX_ENV=test HEXAGON_TPU_OFFLINE=1 mix run bench/versus_ort.exs
fi
echo "==> peak RSS per load"
(cd "$crate" && cargo run --release -q -p qnn_tests --example load_rss)
