#!/usr/bin/env bash
# The offline ExUnit suite on a second Elixir: Debian 13 (trixie) packages Elixir 1.18 on
# OTP 27. Builds a trixie root filesystem once (debootstrap, cached on the machine) and runs,
# inside it, `mix compile --force --warnings-as-errors`, `mix format --check-formatted` and
# `mix test --warnings-as-errors` against the NIF, qnn_sim and its model builder that the
# host built into priv/native/ (bash scripts/test.sh, or this script builds them): that also
# proves the NIF built on bookworm loads under trixie's newer glibc.
#
# Runs as root (debootstrap, chroot, mounts). Everything it mounts lives in a private mount
# namespace (unshare), so nothing stays mounted on the host, even when the run is killed.
#
# Cache: ${XDG_CACHE_HOME:-~/.cache}/hexagon_tpu/trixie (a symlink to the current root
# filesystem). It is rebuilt when missing, broken, built from another recipe (suite, mirror,
# packages, this script's build steps), or older than HEXAGON_TPU_TRIXIE_MAX_AGE_DAYS (30),
# so security updates arrive. A new root filesystem is built beside the old one and swapped in
# by renaming the symlink; a lock keeps concurrent runs from building twice. The Mix build of
# this run goes to _build/elixir-1.18/ in the checkout, apart from the host's _build/test.
#
# The suite's :hex_sources tests (test/nif_not_loaded_hex_test.exs) run here, on the Hex
# packages' sources in HEXAGON_TPU_HEX_SOURCES (default: ../shared/hex beside the checkout, or
# beside the repository it was cloned from), mounted read-only.
#
# Extra arguments go to `mix test`, e.g. bash .ci/elixir-1.18.sh test/stats_test.exs
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
suite=trixie
mirror="${HEXAGON_TPU_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# What the suite needs: Elixir and the erts headers (no compiler: the host builds the NIF).
packages=elixir,erlang-dev
max_age_days="${HEXAGON_TPU_TRIXIE_MAX_AGE_DAYS:-30}"
cache="${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/hexagon_tpu"
link="$cache/$suite"
# The inputs of a build: a change in any of them makes the cached root filesystem stale.
recipe="suite=$suite mirror=$mirror packages=$packages variant=minbase build=2"
recipe_id="$(printf '%s' "$recipe" | sha256sum | cut -c1-12)"

log() { printf '[elixir-1.18] %s\n' "$*"; }
die() {
  printf 'elixir-1.18.sh: %s\n' "$*" >&2
  exit 1
}

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot and mounts)"
for tool in unshare chroot flock; do
  command -v "$tool" >/dev/null || die "'$tool' not found (util-linux / coreutils)"
done
if ! command -v debootstrap >/dev/null; then
  log "installing debootstrap"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

mkdir -p "$cache"
exec 9>"$cache/.$suite.lock"
flock 9

# A usable cache: the link resolves to a finished build of this recipe, young enough, whose
# Elixir starts.
fresh() {
  local dir stamp
  dir="$(readlink -f "$link" 2>/dev/null)" || return 1
  stamp="$dir/.hexagon_tpu-recipe"
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$recipe" ] || return 1
  [ -z "$(find "$stamp" -mtime "+$max_age_days")" ] || return 1
  [ -x "$dir/usr/bin/elixir" ] || return 1
}

build_rootfs() {
  local new
  new="$cache/$suite-$recipe_id-$(date +%Y%m%d%H%M%S)"
  rm -rf "$new"
  log "building the $suite root filesystem in $new (once; cached)"
  # In a private mount namespace: debootstrap's own /proc and /sys mounts cannot outlive it.
  if ! unshare --mount --propagation private \
    debootstrap --variant=minbase --include="$packages" "$suite" "$new" "$mirror" \
    >"$cache/$suite-debootstrap.log" 2>&1; then
    tail -n 30 "$cache/$suite-debootstrap.log" >&2
    rm -rf "$new"
    die "debootstrap failed (full log: $cache/$suite-debootstrap.log)"
  fi
  # Smaller and quicker to reuse: no package lists or downloaded .debs.
  rm -rf "$new"/var/cache/apt/archives/*.deb "$new"/var/lib/apt/lists/*
  printf '%s' "$recipe" >"$new/.hexagon_tpu-recipe"
  # Swap the link atomically, then drop every other build.
  ln -sfn "$(basename "$new")" "$link.tmp"
  mv -T "$link.tmp" "$link"
  local dir
  for dir in "$cache/$suite"-*; do
    [ "$dir" = "$new" ] || [ ! -d "$dir" ] || rm -rf --one-file-system "$dir"
  done
}

if fresh; then
  log "cached $suite root filesystem: $(readlink -f "$link")"
else
  build_rootfs
fi
rootfs="$(readlink -f "$link")"

# The host-built artifacts the suite loads; build them if the host has not yet.
for file in libhexagon_tpu_nif.so libqnn_sim.so qnn-sim-build; do
  if [ ! -f "$root/priv/native/$file" ]; then
    log "priv/native/$file is missing: building the workspace on the host"
    (cd "$root/native/hexagon_tpu_nif" && cargo build --workspace --features hexagon_tpu_nif/test-support)
    "$root/scripts/install-native.sh"
    break
  fi
done

# Inside a private mount namespace with its own PID namespace: /proc, /sys, /dev and the
# checkout are mounted for the chroot only and disappear with it. The trap unmounts them
# too (in reverse order), should the namespace outlive the chroot for any reason.
inner=$(
  cat <<'EOF'
set -euo pipefail
rootfs="$1" src="$2" hex="$3"
shift 3
mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" || true; done
}
trap cleanup EXIT
mnt() { mount "$@"; mounted+=("${!#}"); }
mnt -t proc proc "$rootfs/proc"
mnt -t sysfs -o ro sysfs "$rootfs/sys"
mnt --rbind /dev "$rootfs/dev"
mnt -t tmpfs tmpfs "$rootfs/tmp"
mkdir -p "$rootfs$src"
mnt --bind "$src" "$rootfs$src"
if [ -n "$hex" ]; then
  mkdir -p "$rootfs$hex"
  mnt --bind "$hex" "$rootfs$hex"
  mount -o remount,bind,ro "$rootfs$hex"
fi
chroot "$rootfs" /usr/bin/env -i \
  HOME=/root PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 TERM=dumb CI="${CI:-}" \
  HEXAGON_TPU_OFFLINE=1 MIX_ENV=test MIX_BUILD_ROOT="$src/_build/elixir-1.18" \
  HEXAGON_TPU_HEX_SOURCES="$hex" \
  /bin/bash -euo pipefail -c '
    cd "$1"
    shift
    elixir --version | tail -n 1
    echo "==> mix compile --force --warnings-as-errors (Elixir 1.18)"
    mix compile --force --warnings-as-errors
    echo "==> mix format --check-formatted (Elixir 1.18)"
    mix format --check-formatted
    echo "==> mix test --warnings-as-errors (Elixir 1.18, offline, qnn_sim)"
    mix test --warnings-as-errors "$@"
  ' bash "$src" "$@"
EOF
)

# The Hex packages' sources (/work/shared/hex/README.md), mounted read-only for
# test/nif_not_loaded_hex_test.exs: RustlerPrecompiled's and Rustler's loaders with a NIF that
# cannot load. They sit beside the checkout (../shared/hex); CI runs on a clone in a temporary
# folder, so beside the repository it was cloned from is looked at too. Without them the
# :hex_sources tests are excluded, with a notice.
hex_candidates=("${HEXAGON_TPU_HEX_SOURCES:-}" "$root/../shared/hex")
origin="$(git -C "$root" remote get-url origin 2>/dev/null || true)"
origin="${origin#file://}"
[ -d "$origin" ] && hex_candidates+=("$origin/../shared/hex")
hex=""
for candidate in "${hex_candidates[@]}"; do
  if [ -n "$candidate" ] && [ -d "$candidate/rustler_precompiled" ]; then
    hex="$(cd "$candidate" && pwd)"
    break
  fi
done
if [ -n "$hex" ]; then
  log "the Hex packages' sources: $hex"
else
  log "NOTICE: no Hex packages' sources (HEXAGON_TPU_HEX_SOURCES, ../shared/hex beside the checkout or its origin): the :hex_sources tests are excluded"
fi

log "running the suite in $rootfs"
unshare --mount --propagation private --pid --fork \
  bash -c "$inner" bash "$rootfs" "$root" "$hex" "$@"
