# shellcheck shell=bash
# Sourced by .ci/elixir-1.18.sh (the suite on Elixir 1.18) and .ci/hex-install.sh (the Hex
# install path as a user takes it): a Debian 13 (trixie) root filesystem with Elixir 1.18 on
# OTP 27, built once with debootstrap and cached on the machine, Hex installed in it, and
# trixie_run, which runs a script inside it.
#
# Runs as root (debootstrap, chroot, mounts). Everything trixie_run mounts lives in a private
# mount namespace (unshare), so nothing stays mounted on the host, even when the run is killed.
#
# Cache: ${XDG_CACHE_HOME:-~/.cache}/hexagon_tpu/trixie (a symlink to the current root
# filesystem). It is rebuilt when missing, broken, built from another recipe (suite, mirror,
# packages, the build steps here), or older than HEXAGON_TPU_TRIXIE_MAX_AGE_DAYS (30), so
# security updates arrive. A new root filesystem is built beside the old one and swapped in by
# renaming the symlink; a lock keeps concurrent runs from building twice. Kept in the root
# filesystem, so made once per build of it: Hex (built from the sources' hex/) and the QNN venv
# (.ci/elixir-1.18.sh). Beside it, reused across runs: trixie-cargo-target/ (cargo's target
# folder for builds inside the root filesystem, apart from the host's: its build scripts link
# against trixie's glibc and would not run on the host).
#
# Mounted for the script (host paths, the same paths inside):
#   the checkout (read-write);
#   the Hex packages' sources (read-only; trixie_hex_sources finds them);
#   Rust: $RUSTUP_HOME (read-only) and $CARGO_HOME (its registry cache is shared with the host);
#   the host's CA bundle over the root filesystem's (a registry mirror's CA, if any);
#   the folders in TRIXIE_MOUNTS, each HOST_DIR[:ro|rw[:INSIDE]] (read-only at the same path
#   unless it says otherwise), and the host's resolv.conf.
# Set for the script: HOME=/root, PATH with cargo's bin, LANG=C.UTF-8, CI, HEX_OFFLINE=1,
# CARGO_HOME, RUSTUP_HOME, CARGO_TARGET_DIR, CARGO_TERM_COLOR=never, HEXAGON_TPU_HEX_SOURCES,
# CARGO_HTTP_CAINFO, PIP_CERT and SSL_CERT_FILE (the CA bundle), PYTHONDONTWRITEBYTECODE=1 (no
# __pycache__ in the checkout's priv/compile, which the package ships),
# and the NAME=VALUE pairs given to trixie_run.

trixie_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
trixie_suite=trixie
trixie_mirror="${HEXAGON_TPU_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# Elixir and the erts headers; gcc and libc6-dev, cargo's linker (a forced build of the NIF);
# ca-certificates, for PyPI and the Rust registry; python3-venv, for the QNN venv; libatomic1,
# which Qualcomm's libQnnSystem.so needs.
trixie_packages=elixir,erlang-dev,gcc,libc6-dev,ca-certificates,python3-venv,libatomic1
trixie_max_age_days="${HEXAGON_TPU_TRIXIE_MAX_AGE_DAYS:-30}"
trixie_cache="${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/hexagon_tpu"
trixie_link="$trixie_cache/$trixie_suite"
# The inputs of a build: a change in any of them makes the cached root filesystem stale.
trixie_recipe="suite=$trixie_suite mirror=$trixie_mirror packages=$trixie_packages variant=minbase build=3"
trixie_recipe_id="$(printf '%s' "$trixie_recipe" | sha256sum | cut -c1-12)"
TRIXIE_MOUNTS=()

trixie_log() { printf '[%s] %s\n' "${trixie_label:-trixie}" "$*"; }
trixie_die() {
  printf '%s: %s\n' "${trixie_label:-trixie}" "$*" >&2
  exit 1
}

# A usable cache: the link resolves to a finished build of this recipe, young enough, whose
# Elixir starts.
_trixie_fresh() {
  local dir stamp
  dir="$(readlink -f "$trixie_link" 2>/dev/null)" || return 1
  stamp="$dir/.hexagon_tpu-recipe"
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$trixie_recipe" ] || return 1
  [ -z "$(find "$stamp" -mtime "+$trixie_max_age_days")" ] || return 1
  [ -x "$dir/usr/bin/elixir" ] || return 1
}

_trixie_build() {
  local new dir
  new="$trixie_cache/$trixie_suite-$trixie_recipe_id-$(date +%Y%m%d%H%M%S)"
  rm -rf "$new"
  trixie_log "building the $trixie_suite root filesystem in $new (once; cached)"
  # In a private mount namespace: debootstrap's own /proc and /sys mounts cannot outlive it.
  if ! unshare --mount --propagation private \
    debootstrap --variant=minbase --include="$trixie_packages" "$trixie_suite" "$new" "$trixie_mirror" \
    >"$trixie_cache/$trixie_suite-debootstrap.log" 2>&1; then
    tail -n 30 "$trixie_cache/$trixie_suite-debootstrap.log" >&2
    rm -rf "$new"
    trixie_die "debootstrap failed (full log: $trixie_cache/$trixie_suite-debootstrap.log)"
  fi
  # Smaller and quicker to reuse: no package lists or downloaded .debs.
  rm -rf "$new"/var/cache/apt/archives/*.deb "$new"/var/lib/apt/lists/*
  printf '%s' "$trixie_recipe" >"$new/.hexagon_tpu-recipe"
  # Swap the link atomically, then drop every other build.
  ln -sfn "$(basename "$new")" "$trixie_link.tmp"
  mv -T "$trixie_link.tmp" "$trixie_link"
  for dir in "$trixie_cache/$trixie_suite"-*; do
    [ "$dir" = "$new" ] || [ ! -d "$dir" ] || [ "$dir" = "$trixie_cache/$trixie_suite-cargo-target" ] ||
      rm -rf --one-file-system "$dir"
  done
}

# The Hex packages' sources (/work/shared/hex/README.md), found by scripts/hex-sources.sh.
# Prints the folder; fails without one.
trixie_hex_sources() {
  bash "$trixie_root/scripts/hex-sources.sh" rustler_precompiled hex
}

# Makes the root filesystem ready (built or reused, Hex installed) and sets trixie_rootfs,
# trixie_hex and the Rust paths. Call once, before trixie_run.
trixie_prepare() {
  [ "$(id -u)" = 0 ] || trixie_die "must run as root (debootstrap, chroot and mounts)"
  local tool
  for tool in unshare chroot flock; do
    command -v "$tool" >/dev/null || trixie_die "'$tool' not found (util-linux / coreutils)"
  done
  if ! command -v debootstrap >/dev/null; then
    trixie_log "installing debootstrap"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  fi
  trixie_hex="$(trixie_hex_sources)" ||
    trixie_die "the Hex packages' sources are missing (HEXAGON_TPU_HEX_SOURCES, or ../shared/hex beside the checkout or its origin): this leg runs in Hex mode on them"
  trixie_log "the Hex packages' sources: $trixie_hex"

  # Rust, for a forced build of the NIF inside (rustup's toolchains, cargo's registry cache).
  if ! command -v cargo >/dev/null 2>&1 && [ -f "${HOME:-/root}/.cargo/env" ]; then
    # shellcheck source=/dev/null
    . "${HOME:-/root}/.cargo/env"
  fi
  command -v rustup >/dev/null 2>&1 || trixie_die "rustup not found (the workspace needs Rust >= 1.91 from rustup)"
  trixie_cargo_home="$(cd "${CARGO_HOME:-${HOME:-/root}/.cargo}" && pwd)"
  trixie_rustup_home="$(cd "${RUSTUP_HOME:-${HOME:-/root}/.rustup}" && pwd)"
  trixie_target_dir="$trixie_cache/$trixie_suite-cargo-target"
  # The host's CA bundle, which may trust a registry mirror of this network (shared/hex/README).
  trixie_ca="${CARGO_HTTP_CAINFO:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}"
  [ -f "$trixie_ca" ] || trixie_die "no CA bundle at $trixie_ca (set SSL_CERT_FILE)"

  mkdir -p "$trixie_cache" "$trixie_target_dir"
  exec 9>"$trixie_cache/.$trixie_suite.lock"
  flock 9
  if _trixie_fresh; then
    trixie_log "cached $trixie_suite root filesystem: $(readlink -f "$trixie_link")"
  else
    _trixie_build
  fi
  trixie_rootfs="$(readlink -f "$trixie_link")"

  # Mix wants Hex even when every package is a path dependency (shared/hex/README.md): the
  # archive built from the sources' hex/, once per root filesystem, under the lock.
  local hex_version
  hex_version="$(sed -nE 's/^[[:space:]]*@version[[:space:]]+"([^"]+)".*/\1/p' "$trixie_hex/hex/mix.exs" | head -n1)"
  if [ ! -d "$trixie_rootfs/root/.mix/archives/hex-$hex_version" ]; then
    trixie_log "installing Hex $hex_version in the root filesystem, built from $trixie_hex/hex (once)"
    # shellcheck disable=SC2016 # expanded inside the chroot
    trixie_run -- '
      rm -rf /root/.mix/archives/hex*
      cp -r "$HEXAGON_TPU_HEX_SOURCES/hex" /tmp/hex
      cd /tmp/hex
      MIX_ENV=prod mix archive.build -o "/tmp/hex-$1.ez" >/dev/null
      mix archive.install "/tmp/hex-$1.ez" --force >/dev/null
    ' "$hex_version"
  fi
  flock -u 9
}

# trixie_run [NAME=VALUE ...] -- SCRIPT [ARG ...]: runs the bash SCRIPT (set -euo pipefail)
# inside the root filesystem, in the checkout, with ARGs as "$@".
trixie_run() {
  local env=()
  while [ "$1" != -- ]; do
    env+=("$1")
    shift
  done
  shift
  local script="$1"
  shift
  # Inside a private mount namespace with its own PID namespace: everything is mounted for the
  # chroot only and disappears with it. The trap unmounts too (in reverse order), should the
  # namespace outlive the chroot for any reason.
  # shellcheck disable=SC2016 # expanded by the inner bash
  unshare --mount --propagation private --pid --fork bash -c '
    set -euo pipefail
    rootfs="$1" src="$2" hex="$3" cargo_home="$4" rustup_home="$5" target_dir="$6" mounts="$7" script="$8" ca="$9"
    shift 9
    mounted=()
    cleanup() {
      local i
      for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" || true; done
    }
    trap cleanup EXIT
    mnt() { mount "$@"; mounted+=("${!#}"); }
    bind() { # bind HOST_DIR [ro|rw [INSIDE]]: at INSIDE (default: the same path)
      local at="$rootfs${3:-$1}"
      mkdir -p "$at"
      mnt --bind "$1" "$at"
      [ "${2:-rw}" != ro ] || mount -o remount,bind,ro "$at"
    }
    mnt -t proc proc "$rootfs/proc"
    mnt -t sysfs -o ro sysfs "$rootfs/sys"
    mnt --rbind /dev "$rootfs/dev"
    mnt -t tmpfs tmpfs "$rootfs/tmp"
    mnt --bind /etc/resolv.conf "$rootfs/etc/resolv.conf"
    mnt --bind "$ca" "$rootfs/etc/ssl/certs/ca-certificates.crt"
    bind "$src"
    bind "$hex" ro
    bind "$cargo_home"
    bind "$rustup_home" ro
    bind "$target_dir"
    while IFS=: read -r dir mode inside; do
      [ -z "$dir" ] || bind "$dir" "${mode:-ro}" "$inside"
    done <<<"$mounts"
    n=$1
    shift
    envs=("${@:1:$n}")
    shift "$n"
    cert=/etc/ssl/certs/ca-certificates.crt
    chroot "$rootfs" /usr/bin/env -i \
      HOME=/root PATH="$cargo_home/bin:/usr/local/bin:/usr/bin:/bin" LANG=C.UTF-8 TERM=dumb \
      CI="${CI:-}" HEX_OFFLINE=1 HEXAGON_TPU_HEX_SOURCES="$hex" \
      CARGO_HOME="$cargo_home" RUSTUP_HOME="$rustup_home" CARGO_TARGET_DIR="$target_dir" \
      CARGO_TERM_COLOR=never CARGO_HTTP_CAINFO="$cert" PIP_CERT="$cert" SSL_CERT_FILE="$cert" \
      PYTHONDONTWRITEBYTECODE=1 \
      "${envs[@]}" \
      /bin/bash -euo pipefail -c "cd \"\$0\"; $script" "$src" "$@"
  ' bash "$trixie_rootfs" "$trixie_root" "$trixie_hex" "$trixie_cargo_home" "$trixie_rustup_home" \
    "$trixie_target_dir" "$(printf '%s\n' "${TRIXIE_MOUNTS[@]}")" "$script" "$trixie_ca" \
    "${#env[@]}" "${env[@]}" "$@"
}
