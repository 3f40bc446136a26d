#!/usr/bin/env bash
# Checks what the Hex package ships: copies exactly the files mix.exs lists into a temporary
# directory, strips the host backend from the Rust workspace as the release does
# (scripts/strip-host-backend.sh), and builds the NIF from that copy with cargo, offline, as a
# forced build (HEXAGON_TPU_BUILD=1) on a user's machine would. Fails if the package would ship
# the host backend or any test code, or if the NIF does not build from it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

files=$(HEXAGON_TPU_OFFLINE=1 mix run --no-compile --no-deps-check --no-start \
  -e 'IO.puts(Enum.join(Mix.Project.config()[:package][:files], "\n"))')
echo "package files:"
sed 's/^/  /' <<<"$files"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
while IFS= read -r entry; do
  matched=0
  for path in $entry; do # globs such as checksum-*.exs
    [[ -e "$path" ]] || continue
    matched=1
    mkdir -p "$stage/$(dirname "$path")"
    cp -R "$path" "$stage/$path"
  done
  if [[ $matched == 0 && "$entry" != checksum-*.exs ]]; then
    echo "package-check: mix.exs lists '$entry', which does not exist" >&2
    exit 1
  fi
done <<<"$files"

if find "$stage" -path '*qnn_sim*' -o -path '*/tests/*' -o -name '*_test.exs' | grep -q .; then
  echo "package-check: the package would ship the host backend or tests:" >&2
  find "$stage" -path '*qnn_sim*' -o -path '*/tests/*' -o -name '*_test.exs' >&2
  exit 1
fi

bash scripts/strip-host-backend.sh "$stage"
echo "building the NIF from the package's files (cargo build --release --offline)"
(
  cd "$stage/native/hexagon_tpu_nif"
  CARGO_TARGET_DIR="$root/native/hexagon_tpu_nif/target/package-check" \
    cargo build --release --offline -p hexagon_tpu_nif
)
echo "package-check: the NIF builds from the package's files without the host backend"
