#!/usr/bin/env bash
# The demo, on a host without an NPU or Hex:
#   0. installs what is missing (scripts/setup.sh: Elixir, python3-venv, the pinned
#      onnxruntime-qnn venv that holds Qualcomm's QNN host libraries);
#   1. builds the NIF and qnn_sim, the simulated QNN backend (release), makes a small
#      quantized classifier with the backend's model builder, loads it, predicts, and prints
#      the outputs, the timings and HexagonTpu.Stats.native/0 (examples/demo.exs);
#   2. where Qualcomm's stack is installed: writes a small float ONNX classifier
#      (examples/tiny_model.py), compiles it into a real QNN context binary for the QCS6490's
#      HTP v68 with `mix hexagon_tpu.compile`, runs it on Qualcomm's HTP emulator and compares
#      the prediction with ONNX Runtime's QNN EP on the same binary (examples/demo_real.exs,
#      examples/ort_reference.py).
#
# Needs Rust >= 1.91 (rustup); the rest is installed when running as root.
# HEXAGON_TPU_QNN_HOST=0 skips the QNN stack (qnn_sim only).
set -euo pipefail

export HEXAGON_TPU_OFFLINE="${HEXAGON_TPU_OFFLINE:-1}"

# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

echo "==> cargo build --release (the NIF, qnn_sim, its model builder and the fake rpcmem)"
(cd "$crate" && cargo build --release -p hexagon_tpu_nif -p qnn_sim -p qnn_fake_rpcmem)
"$root/scripts/install-native.sh" "$target/release"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$root"

echo "==> building the model: examples/pattern_classifier.json"
"$root/priv/native/qnn-sim-build" "$root/examples/pattern_classifier.json" -o "$work/pattern_classifier.bin"

echo "==> mix run examples/demo.exs (qnn_sim)"
mix run examples/demo.exs "$work/pattern_classifier.bin" "$root/priv/native/libqnn_sim.so"

if [ "$HEXAGON_TPU_QNN_STACK" != 1 ]; then
  echo
  echo "Skipping the demo on Qualcomm's HTP emulator: Qualcomm's QNN stack is not installed ($HEXAGON_TPU_QNN_STACK_NOTE)."
  exit 0
fi

real="$work/real"
echo
echo "==> examples/tiny_model.py: a small float ONNX classifier, seeded"
"$HEXAGON_TPU_QNN_PYTHON" "$root/examples/tiny_model.py" "$real"

echo "==> mix hexagon_tpu.compile: quantize (calibration data), compile for HTP v68 (QCS6490)"
mix hexagon_tpu.compile "$real/tiny_classifier.onnx" -o "$real/tiny_classifier.bin" \
  --calibration "$real/calibration" --save-ctx

echo "==> examples/ort_reference.py: ONNX Runtime's QNN EP on the same binary (the reference)"
"$HEXAGON_TPU_QNN_PYTHON" "$root/examples/ort_reference.py" \
  "$real/tiny_classifier_ctx.onnx" "$real/input.f32" "$real/ort_output.f32"

echo "==> mix run examples/demo_real.exs (Qualcomm's HTP emulator)"
mix run examples/demo_real.exs "$real/tiny_classifier.bin" "$HEXAGON_TPU_QNN_LIB_DIR" \
  "$real/input.f32" "$real/ort_output.f32"
