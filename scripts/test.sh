#!/usr/bin/env bash
# The whole test suite, on a host without QNN, an NPU or Hex:
#   1. builds the cargo workspace (the NIF, the qnn crate, the host QNN backend and its
#      model builder) and runs its Rust tests;
#   2. puts the NIF, the host backend and the builder in priv/native/;
#   3. runs ExUnit offline (HEXAGON_TPU_OFFLINE=1: no Hex packages) against the host backend.
#
# Needs cargo (Rust >= 1.91, e.g. from rustup) and Elixir >= 1.14 (Debian 12: apt-get
# install elixir erlang-dev). Extra arguments go to `mix test`, e.g.
#   bash scripts/test.sh test/stats_test.exs --trace
set -euo pipefail

# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

echo "==> cargo build (workspace)"
(cd "$crate" && cargo build --workspace)

# The NIF crate itself cannot link a test binary (the enif_* symbols exist only inside the
# VM); its logic lives in the qnn crate, and ExUnit below tests it through the VM.
echo "==> cargo test (workspace)"
(cd "$crate" && cargo test --workspace)

echo "==> priv/native"
"$root/scripts/install-native.sh" "$target/debug"

echo "==> mix test (offline, host QNN backend)"
cd "$root"
# Offline unless the caller says otherwise (HEXAGON_TPU_OFFLINE=0 with Hex deps fetched, as
# CI's hex-deps job does to run the Nx tests through RustlerPrecompiled's forced build).
export HEXAGON_TPU_OFFLINE="${HEXAGON_TPU_OFFLINE:-1}" MIX_ENV=test
mix test "$@"
