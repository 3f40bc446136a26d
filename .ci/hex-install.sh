#!/usr/bin/env bash
# The Hex install path, end to end, as a user takes it (issue 15): a user's project, made in a
# temporary folder inside the Debian 13 root filesystem of .ci/trixie.sh (Elixir 1.18: rustler
# 0.38 needs 1.15+), depends on hexagon_tpu as the Hex package ships it (the files mix.exs's
# package lists, with the release's checksum-Elixir.HexagonTpu.Native.exs) and on
# nimble_options, rustler_precompiled, castore and telemetry (hexagon_tpu's Hex dependencies;
# rustler and jason for the forced build) from their sources in ../shared/hex, by path: hex.pm
# cannot be reached, the rest is what a user gets (MIX_ENV=prod, no HEXAGON_TPU_OFFLINE). Steps, each printed:
#
#   1. download, checksum, load, predict: the precompiled NIF is fetched over HTTP from a
#      server on 127.0.0.1 serving what .ci/release-dry-run.sh built, through the mirror
#      setting (`config :hexagon_tpu, :nif_base_url`), checked against the checksum file,
#      loaded, and the pattern classifier (examples/pattern_classifier.json) predicts right on
#      qnn_sim;
#   2. a NIF that cannot load (its file overwritten): the application runs and
#      HexagonTpu.availability/1 says why;
#   2b. Nx added to the project after hexagon_tpu compiled (nx and complex from their sources):
#      hexagon_tpu is not compiled again, and tensors go in and come out (a batch of four);
#   3. a tampered artifact (the library inside changed, repacked under the same name), served
#      through HEXAGON_TPU_NIF_BASE_URL: refused with RustlerPrecompiled's checksum error;
#   4. the forced build (HEXAGON_TPU_BUILD=1): Rustler runs cargo (the host's toolchain,
#      mounted; the target folder cached beside the root filesystem) on the package's own
#      crate, and the NIF it builds loads and predicts.
#
#   .ci/hex-install.sh [RELEASE_DIR]
#
# RELEASE_DIR holds artifacts/ and the checksum file (RELEASE_OUT_DIR of .ci/release-dry-run.sh,
# as .ci/run passes it); without it the dry run is made here first. qnn_sim and its model
# builder come from priv/native/ (bash scripts/test.sh builds them).
set -euo pipefail

trixie_label=hex-install
# shellcheck source=.ci/trixie.sh
source "$(dirname "${BASH_SOURCE[0]}")/trixie.sh"
# shellcheck source=.ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
root="$trixie_root"
cd "$root"

for file in libqnn_sim.so qnn-sim-build; do
  [ -f "priv/native/$file" ] || trixie_die "priv/native/$file is missing: run bash scripts/test.sh first"
done

work="$(mktemp -d "${TMPDIR:-/tmp}/hexagon_tpu-hex-install.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# The package as Hex ships it, and the release's artifacts to serve (lib.sh).
hex_user_stage "$work" "${1:-}"
version=$hex_version

trixie_prepare
# At a fixed path inside, so that cargo's fingerprints (paths, kept mtimes) reuse the last run's
# forced build.
TRIXIE_MOUNTS=("$work:rw:/tmp/hex-install")
trixie_log "a user's project in $trixie_rootfs:/tmp/hex-install/app"
started=$SECONDS
# shellcheck disable=SC2016 # expanded inside the chroot
trixie_run MIX_ENV=prod -- '
  version="$1" src="$PWD" w=/tmp/hex-install
  sources="$HEXAGON_TPU_HEX_SOURCES"
  unset HEXAGON_TPU_HEX_SOURCES # the user has no such thing
  say() { printf "[hex-install] %s\n" "$*"; }
  fail() {
    printf "hex-install: %s\n" "$*" >&2
    exit 1
  }
  target="$(uname -m)-unknown-linux-gnu"
  nif="libhexagon_tpu_nif-v$version-nif-2.15-$target.so"

  # The mirror: a plain HTTP server on 127.0.0.1, its request log kept (lib.sh).
  source "$src/.ci/lib.sh"
  mirror_serve "$w/www" "$w/http.log"
  port=$mirror_port
  url="http://127.0.0.1:$port/v$version"
  say "serving $(ls "$w/www/v$version" | tr "\n" " ")at $url"

  "$src/priv/native/qnn-sim-build" "$src/examples/pattern_classifier.json" -o "$w/model.bin" >/dev/null
  sim="$src/priv/native/libqnn_sim.so"

  app="$w/app"
  mkdir -p "$app/config"
  cat >"$app/mix.exs" <<MIX
defmodule HexUser.MixProject do
  use Mix.Project

  def project, do: [app: :hex_user, version: "0.1.0", elixir: "~> 1.15", deps: deps()]

  # hexagon_tpu as Hex ships it; its Hex dependencies from their sources (hex.pm is out of
  # reach); Rustler only for the forced build.
  defp deps do
    forced = if System.get_env("HEXAGON_TPU_BUILD") == "1", do: ~w(rustler jason)a, else: []

    [{:hexagon_tpu, path: "$w/hexagon_tpu"}] ++
      for name <- ~w(nimble_options rustler_precompiled castore telemetry)a ++ forced,
          do: {name, path: Path.join("$sources", Atom.to_string(name)), override: true}
  end
end
MIX
  # The mirror setting a user writes (guides/nerves.md, "A mirror of the precompiled NIFs").
  printf "import Config\n\nconfig :hexagon_tpu, nif_base_url: \"%s\"\n" "$url" >"$app/config/config.exs"
  cd "$app"
  export RUSTLER_PRECOMPILED_GLOBAL_CACHE_PATH="$w/rustler_precompiled_cache"
  compile() {
    rm -rf "$RUSTLER_PRECOMPILED_GLOBAL_CACHE_PATH"
    mix deps.compile hexagon_tpu --force >"$w/compile.log" 2>&1
  }
  # .ci/hex_user_check.exs through `mix run`: its USER lines, or everything when it fails.
  user() {
    local flags=()
    [ "$1" != --no-compile ] || { flags=(--no-compile); shift; }
    mix run "${flags[@]}" "$src/.ci/hex_user_check.exs" "$@" >"$w/run.log" 2>&1 ||
      { cat "$w/run.log"; fail "the user'"'"'s check ($1) failed"; }
    sed -n "s/^USER /[hex-install] /p" "$w/run.log"
  }
  requests() { grep -c "\"GET /.*$nif.tar.gz HTTP/1.[01]\" 200" "$w/http.log" || true; }

  echo "==> 1. download, checksum, load, predict"
  mix deps.compile nimble_options rustler_precompiled castore telemetry >/dev/null
  compile || { cat "$w/compile.log"; fail "the download build failed"; }
  [ "$(requests)" = 1 ] || fail "expected one GET of $nif.tar.gz: $(cat "$w/http.log")"
  say "download: GET $url/$nif.tar.gz 200 ($(stat -c %s "$w/www/v$version/$nif.tar.gz") bytes)"
  sum="$(sha256sum "$RUSTLER_PRECOMPILED_GLOBAL_CACHE_PATH/$nif.tar.gz" | cut -d" " -f1)"
  grep -q "\"$nif.tar.gz\" => \"sha256:$sum\"" "$w/hexagon_tpu/checksum-Elixir.HexagonTpu.Native.exs" ||
    fail "the downloaded artifact sha256 $sum is not the checksum file'"'"'s"
  say "checksum: sha256:$sum, as checksum-Elixir.HexagonTpu.Native.exs says"
  user predict "$nif" "$w/model.bin" "$sim"

  echo "==> 2. a NIF that cannot load: the application runs, availability/1 says why"
  lib="$app/_build/prod/lib/hexagon_tpu/priv/native/$nif"
  cp "$lib" "$w/good.so"
  printf "not a shared object\n%.0s" $(seq 100) >"$lib"
  user --no-compile not_loaded "invalid ELF header"
  cp "$w/good.so" "$lib"

  echo "==> 2b. Nx added after hexagon_tpu compiled: no recompile, tensors in and out"
  beam="$app/_build/prod/lib/hexagon_tpu/ebin/Elixir.HexagonTpu.Tensor.beam"
  before="$(stat -c %Y.%s "$beam")"
  cp mix.exs "$w/mix.exs.without_nx"
  sed -i "s/~w(nimble_options rustler_precompiled castore telemetry)a/~w(nimble_options rustler_precompiled castore telemetry nx complex)a/" mix.exs
  mix deps.compile nx complex >/dev/null
  user nx_later "$w/model.bin" "$sim"
  [ "$(stat -c %Y.%s "$beam")" = "$before" ] || fail "hexagon_tpu was compiled again when Nx came"
  say "hexagon_tpu was not compiled again ($(basename "$beam") unchanged)"
  cp "$w/mix.exs.without_nx" mix.exs

  echo "==> 3. a tampered artifact is refused"
  mkdir -p "$w/tamper" "$w/www/tampered"
  tar -xzf "$w/www/v$version/$nif.tar.gz" -C "$w/tamper"
  printf "\x00" | dd of="$w/tamper/$nif" bs=1 seek=4096 conv=notrunc status=none
  tar -czf "$w/www/tampered/$nif.tar.gz" -C "$w/tamper" "$nif"
  if HEXAGON_TPU_NIF_BASE_URL="http://127.0.0.1:$port/tampered" compile; then
    fail "a tampered artifact was accepted: $(cat "$w/compile.log")"
  fi
  grep -q "GET /tampered/$nif.tar.gz" "$w/http.log" || fail "the tampered artifact was not requested"
  message="the integrity check failed because the checksum of files does not match"
  grep -q "$message" "$w/compile.log" || { cat "$w/compile.log"; fail "not the checksum error"; }
  say "tampered: GET /tampered/$nif.tar.gz, refused: $(grep -o "Error while downloading precompiled NIF: $message" "$w/compile.log")"

  echo "==> 4. the forced build (HEXAGON_TPU_BUILD=1): Rustler and cargo, then load and predict"
  export HEXAGON_TPU_BUILD=1
  mix deps.compile rustler jason >/dev/null
  t=$SECONDS
  compile || { cat "$w/compile.log"; fail "the forced build failed"; }
  grep -q "Compiling crate hexagon_tpu_nif in release mode" "$w/compile.log" || fail "Rustler did not build: $(cat "$w/compile.log")"
  say "forced build: $(grep -o "Compiling crate hexagon_tpu_nif in release mode.*" "$w/compile.log") in $((SECONDS - t)) s"
  user predict hexagon_tpu_nif.so "$w/model.bin" "$sim"
' "$version"
trixie_log "the Hex install path took $((SECONDS - started)) s"
