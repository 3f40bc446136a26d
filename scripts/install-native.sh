#!/usr/bin/env bash
# Copies the NIF, qnn_sim (the simulated QNN backend), its model builder and the fake rpcmem
# (shared buffers' tests) from a cargo output
# directory (default: the debug build) into priv/native/, where HexagonTpu.Native and the tests
# find them. Files are replaced by rename, so a running VM that has the old NIF loaded is safe.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
from="${1:-${CARGO_TARGET_DIR:-$root/native/hexagon_tpu_nif/target}/debug}"
dest="$root/priv/native"
mkdir -p "$dest"

for file in libhexagon_tpu_nif.so libqnn_sim.so qnn-sim-build libqnn_fake_rpcmem.so; do
  if [ ! -f "$from/$file" ]; then
    echo "install-native.sh: $from/$file is missing (was the workspace built?)" >&2
    exit 1
  fi
  cp "$from/$file" "$dest/.$file.tmp"
  mv -f "$dest/.$file.tmp" "$dest/$file"
done

echo "installed into $dest: libhexagon_tpu_nif.so libqnn_sim.so qnn-sim-build libqnn_fake_rpcmem.so"
