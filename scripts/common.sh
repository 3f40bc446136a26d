# Sourced by scripts/test.sh and scripts/demo.sh: the repository's paths and the tools both need.
# shellcheck shell=bash disable=SC2034 # the variables are for the sourcing script

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
crate="$root/native/hexagon_tpu_nif"
target="${CARGO_TARGET_DIR:-$crate/target}"

for tool in cargo mix; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "$(basename "$0"): '$tool' not found; install Rust (rustup) and Elixir (apt-get install elixir erlang-dev)" >&2
    exit 1
  fi
done
