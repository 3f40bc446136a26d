#!/usr/bin/env bash
# Release dry run: builds the NIF for every release target, packages each one the
# way philss/rustler-precompiled-action does, verifies the set and writes
# rustler_precompiled's checksum file into a temporary directory (never into the
# repository).
#
#   .ci/release-dry-run.sh                 build, package, verify, print the checksum file
#                                          (into RELEASE_OUT_DIR if set, else a temporary one)
#   .ci/release-dry-run.sh verify DIR OUT  verify the artifacts in DIR and write the checksum
#                                          file OUT (the release workflow uses this)
#   .ci/release-dry-run.sh version         print @version from mix.exs (checked against Cargo.toml)
#   .ci/release-dry-run.sh check-nif LIB   only the test-support check below, on one library
#                                          (.ci/package-check.sh uses this)
#
# Verification fails unless there is exactly one artifact per target, each a
# .tar.gz holding the single file rustler_precompiled extracts, an ELF shared
# object for that target's CPU exporting nif_init, needing at most GLIBC_2.34,
# without test support (below), and no two artifacts (nor the libraries inside them)
# share a sha256.
#
# Test support: the cargo feature `test-support` adds the `qnn_sim_counters` NIF
# (native/hexagon_tpu_nif/src/sim_probe.rs), which dlopens any path it is given to read
# qnn_sim's counters. A release never enables it. Rustler's NIF function table holds each
# NIF's name as a C string, and the probe looks up qnn_sim's `QnnSim_*` exports by name, so
# a library with either string is refused.
#
# Honours CARGO_TARGET_DIR, so an aarch64 build left by .ci/aarch64.sh is reused.
set -euo pipefail

cd "$(dirname "$0")/.."
REPO_ROOT=$(pwd)

CRATE=hexagon_tpu_nif
CRATE_DIR="$REPO_ROOT/native/hexagon_tpu_nif"
NIF_MODULE=Elixir.HexagonTpu.Native
NIF_VERSION=2.15
TARGETS=(aarch64-unknown-linux-gnu x86_64-unknown-linux-gnu)
GLIBC_MAX=2.34
TEST_SUPPORT_STRINGS=(qnn_sim_counters QnnSim_)
TARGET_DIR="${CARGO_TARGET_DIR:-$CRATE_DIR/target}"

# shellcheck source=.ci/lib.sh
source "$REPO_ROOT/.ci/lib.sh"

TMP_DIRS=()
trap 'rm -rf "${TMP_DIRS[@]}"' EXIT

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }


# @version from mix.exs; the crate's version must agree (Cargo.toml says "keep in
# step with mix.exs").
project_version() {
  local mix_version cargo_version
  [ -f "$REPO_ROOT/mix.exs" ] || die "mix.exs not found in $REPO_ROOT"
  mix_version=$(sed -nE 's/^[[:space:]]*@version[[:space:]]+"([^"]+)".*/\1/p' "$REPO_ROOT/mix.exs" | head -n1)
  [ -n "$mix_version" ] || die 'no @version "x.y.z" line in mix.exs'
  cargo_version=$(sed -nE 's/^version[[:space:]]*=[[:space:]]*"([^"]+)".*/\1/p' "$CRATE_DIR/Cargo.toml" | head -n1)
  [ "$cargo_version" = "$mix_version" ] ||
    die "mix.exs @version $mix_version differs from $CRATE_DIR/Cargo.toml version $cargo_version"
  printf '%s\n' "$mix_version"
}

# check_nif LIB: fails if LIB has test support compiled in (see the header).
check_nif() {
  local lib=$1 found=() needle
  [ -f "$lib" ] || die "$lib not found"
  for needle in "${TEST_SUPPORT_STRINGS[@]}"; do
    LC_ALL=C grep -qaF -- "$needle" "$lib" && found+=("$needle")
  done
  [ "${#found[@]}" -eq 0 ] ||
    die "$(basename "$lib") contains test support (${found[*]}): it was built with the cargo feature test-support"
  printf '  %s: no test support (%s absent)\n' "$(basename "$lib")" "${TEST_SUPPORT_STRINGS[*]}" >&2
}

artifact_name() { # version target
  printf 'lib%s-v%s-nif-%s-%s.so.tar.gz\n' "$CRATE" "$1" "$NIF_VERSION" "$2"
}

elf_machine() { # target -> what `readelf -h` prints as Machine
  case "$1" in
    aarch64-*) echo "AArch64" ;;
    x86_64-*) echo "Advanced Micro Devices X86-64" ;;
    *) die "no ELF machine known for $1" ;;
  esac
}

# verify DIR OUT: checks the artifacts in DIR, writes the checksum file OUT.
verify() {
  local dir=$1 out=$2
  [ -d "$dir" ] || die "artifact directory $dir not found"
  [ ! -e "$out" ] || die "$out already exists; refusing to overwrite it"
  command -v readelf >/dev/null 2>&1 || apt_install binutils
  local version
  version=$(project_version)
  log "verifying $dir for version $version, NIF $NIF_VERSION, targets ${TARGETS[*]}"

  local expected=() name target
  for target in "${TARGETS[@]}"; do expected+=("$(artifact_name "$version" "$target")"); done

  # Nothing else may sit among the artifacts (a stale version, a missing target).
  local found
  found=$(cd "$dir" && find . -maxdepth 1 -type f -name '*.tar.gz' -printf '%f\n' | LC_ALL=C sort)
  if [ "$found" != "$(printf '%s\n' "${expected[@]}" | LC_ALL=C sort)" ]; then
    printf 'expected:\n' >&2
    printf '  %s\n' "${expected[@]}" >&2
    printf 'found:\n' >&2
    printf '%s\n' "$found" | sed 's/^/  /' >&2
    die "the artifact set in $dir is not one artifact per target"
  fi

  local work
  work=$(mktemp -d)
  TMP_DIRS+=("$work")
  local -a tar_sums=() lib_sums=()
  local i tarball member members lib

  # 1. Unpack: each artifact holds exactly the one file rustler_precompiled loads.
  for i in "${!TARGETS[@]}"; do
    target=${TARGETS[$i]}
    name=${expected[$i]}
    tarball="$dir/$name"
    member=${name%.tar.gz}
    members=$(tar -tzf "$tarball")
    [ "$members" = "$member" ] ||
      die "$name must hold exactly one file, $member; it holds: $(printf '%s\n' "$members" | tr '\n' ' ')"
    mkdir -p "$work/$target"
    tar -xzf "$tarball" -C "$work/$target"
    tar_sums+=("$(sha256sum "$tarball" | cut -d' ' -f1)")
    lib_sums+=("$(sha256sum "$work/$target/$member" | cut -d' ' -f1)")
  done

  # 2. Distinct: 0.1.0 once shipped one binary under every target's name.
  local dup
  dup=$(printf '%s\n' "${tar_sums[@]}" | sort | uniq -d)
  [ -z "$dup" ] || die "two targets' artifacts have the same sha256 ($dup); refusing to release"
  dup=$(printf '%s\n' "${lib_sums[@]}" | sort | uniq -d)
  [ -z "$dup" ] || die "two targets' libraries have the same sha256 ($dup); refusing to release"

  # 3. Each library is a NIF for its own target's CPU, within the glibc floor.
  local header machine type glibc
  for i in "${!TARGETS[@]}"; do
    target=${TARGETS[$i]}
    member=${expected[$i]%.tar.gz}
    lib="$work/$target/$member"
    header=$(readelf -h "$lib" 2>/dev/null) || die "$member is not an ELF file"
    machine=$(printf '%s\n' "$header" | sed -nE 's/^[[:space:]]*Machine:[[:space:]]+(.*)$/\1/p')
    type=$(printf '%s\n' "$header" | sed -nE 's/^[[:space:]]*Type:[[:space:]]+([A-Z]+).*/\1/p')
    [ "$machine" = "$(elf_machine "$target")" ] || die "$member is built for '$machine', not $target"
    [ "$type" = "DYN" ] || die "$member is not a shared object (ELF type $type)"
    readelf --dyn-syms --wide "$lib" | awk '$7 != "UND" && $8 == "nif_init" {f=1} END {exit !f}' ||
      die "$member does not export nif_init"
    glibc=$(readelf --version-info --wide "$lib" | grep -oE 'GLIBC_[0-9]+(\.[0-9]+)+' | sort -u -V | tail -n1)
    if [ -n "$glibc" ] &&
      [ "$(printf '%s\n%s\n' "${glibc#GLIBC_}" "$GLIBC_MAX" | sort -V | tail -n1)" != "$GLIBC_MAX" ]; then
      die "$member needs $glibc, above GLIBC_$GLIBC_MAX"
    fi
    check_nif "$lib"
    printf '  %-26s sha256:%s  %s, needs %s\n' "$target" "${tar_sums[$i]}" "$machine" "${glibc:-no glibc}" >&2
  done

  # The same layout `mix rustler_precompiled.download ... --all --print` writes:
  # entries sorted by file name, one per line, with a trailing comma.
  {
    echo "%{"
    for i in "${!expected[@]}"; do
      printf '  "%s" => "sha256:%s",\n' "${expected[$i]}" "${tar_sums[$i]}"
    done | LC_ALL=C sort
    echo "}"
  } >"$out"
  log "wrote $out"
}

# The same check the action's build.sh makes: NIF 2.15 must be the highest
# rustler nif_version feature active, or be activatable with --features.
check_nif_feature() {
  local features highest
  features=$(cd "$CRATE_DIR" && cargo tree -e features --depth 1 -i rustler -f '{p};{f}' --prefix none | head -n1)
  highest=$(printf '%s\n' "$features" | cut -d';' -f2 | tr ',' '\n' | grep nif_version | sort -r | head -n1)
  log "rustler features: $features"
  [ "$highest" = "nif_version_${NIF_VERSION/./_}" ] ||
    die "highest active rustler NIF feature is '$highest', not nif_version_${NIF_VERSION/./_}; rustler-precompiled-action would need --features"
}

dry_run() {
  local version out_dir
  version=$(project_version)
  # RELEASE_OUT_DIR: where to put them (.ci/run hands it to .ci/hex-install.sh); a new
  # temporary directory otherwise.
  if [ -n "${RELEASE_OUT_DIR:-}" ]; then
    out_dir=$RELEASE_OUT_DIR
    mkdir -p "$out_dir"
  else
    out_dir=$(mktemp -d "${TMPDIR:-/tmp}/hexagon_tpu-release.XXXXXX")
  fi
  log "release dry run for v$version into $out_dir (target dir $TARGET_DIR)"

  apt_install gcc-aarch64-linux-gnu libc6-dev-arm64-cross binutils
  command -v rustup >/dev/null 2>&1 || die "rustup not found (the workspace needs Rust >= 1.91 from rustup)"
  (cd "$CRATE_DIR" && rustup target add "${TARGETS[@]}" >&2)
  check_nif_feature

  mkdir -p "$out_dir/artifacts"
  local name member stage
  for target in "${TARGETS[@]}"; do
    # What the action runs: `cargo build --target=<target> --release` in project-dir.
    log "cargo build --release --target $target"
    (cd "$CRATE_DIR" && cargo build --release --target "$target" >&2)
    name=$(artifact_name "$version" "$target")
    member=${name%.tar.gz}
    stage=$(mktemp -d)
    TMP_DIRS+=("$stage")
    cp "$TARGET_DIR/$target/release/lib$CRATE.so" "$stage/$member"
    tar -czf "$out_dir/artifacts/$name" -C "$stage" "$member"
    log "packaged $name"
  done

  verify "$out_dir/artifacts" "$out_dir/checksum-$NIF_MODULE.exs"
  echo
  echo "# $out_dir/checksum-$NIF_MODULE.exs"
  cat "$out_dir/checksum-$NIF_MODULE.exs"
  echo
  echo "artifacts: $out_dir/artifacts"
  ls -l "$out_dir/artifacts"
}

case "${1:-}" in
  "") dry_run ;;
  verify)
    [ $# -eq 3 ] || die "usage: $0 verify ARTIFACT_DIR CHECKSUM_FILE"
    verify "$2" "$3"
    ;;
  version) project_version ;;
  check-nif)
    [ $# -eq 2 ] || die "usage: $0 check-nif LIBRARY"
    check_nif "$2"
    ;;
  *) die "usage: $0 [verify ARTIFACT_DIR CHECKSUM_FILE | version | check-nif LIBRARY]" ;;
esac
