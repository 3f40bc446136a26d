#!/usr/bin/env bash
# The whole test suite, on a host without an NPU or Hex:
#   0. installs what is missing (scripts/setup.sh: Elixir, python3-venv, the pinned
#      onnxruntime-qnn venv that holds Qualcomm's QNN host libraries);
#   1. builds the cargo workspace (the NIF with its test-support NIF, the qnn crate, qnn_sim
#      (the simulated QNN backend) and its model builder) and runs its Rust tests;
#   2. puts the NIF, qnn_sim and the builder in priv/native/;
#   3. runs ExUnit offline (HEXAGON_TPU_OFFLINE=1: no Hex packages) against qnn_sim
#      and, when the QNN stack is installed, the :qnn_host suite against Qualcomm's HTP
#      emulator (test/test_helper.exs includes it when HexagonTpu.Compiler.qnn_lib_dir/0 finds
#      the libraries).
#
# Needs Rust >= 1.91 (rustup); the rest is installed when running as root. Extra arguments go
# to `mix test`, e.g.
#   bash scripts/test.sh test/stats_test.exs --trace
# HEXAGON_TPU_QNN_HOST=0 skips the QNN stack (qnn_sim only).
set -euo pipefail

# Offline unless the caller says otherwise (HEXAGON_TPU_OFFLINE=0 with Hex deps fetched, as
# CI's hex-deps job does to run the Nx tests through RustlerPrecompiled's forced build).
export HEXAGON_TPU_OFFLINE="${HEXAGON_TPU_OFFLINE:-1}" MIX_ENV=test

# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

# The suite reads qnn_sim's counters through the NIF's qnn_sim_counters, which only the cargo
# feature test-support compiles in (releases never do).
features=(--features hexagon_tpu_nif/test-support)

echo "==> cargo build (workspace)"
(cd "$crate" && cargo build --workspace "${features[@]}")

# The NIF crate itself cannot link a test binary (the enif_* symbols exist only inside the
# VM); its logic lives in the qnn crate, and ExUnit below tests it through the VM.
echo "==> cargo test (workspace)"
(cd "$crate" && cargo test --workspace "${features[@]}")

echo "==> priv/native"
"$root/scripts/install-native.sh" "$target/debug"

echo "==> mix test (qnn_sim, and Qualcomm's HTP emulator when installed)"
if [ "$HEXAGON_TPU_QNN_STACK" = 1 ]; then
  echo "the :qnn_host suite runs: Qualcomm's libraries in $HEXAGON_TPU_QNN_LIB_DIR"
else
  echo "the :qnn_host suite is skipped: Qualcomm's QNN stack is not installed ($HEXAGON_TPU_QNN_STACK_NOTE)"
fi
cd "$root"
mix test "$@"
