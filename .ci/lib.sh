# shellcheck shell=bash
# Sourced by the .ci scripts: what more than one of them needs, written once.

# apt-get install the Debian packages among "$@" that are not installed yet. As root only:
# otherwise it stops with the list to install.
apt_install() {
  local missing=() pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "error: missing Debian packages: ${missing[*]} (run as root, or install them)" >&2
    exit 1
  fi
  printf '==> apt-get install %s\n' "${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The cross toolchain for aarch64-unknown-linux-gnu (Debian's gcc-aarch64-linux-gnu), for cargo
# and for the cc crate.
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
export AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# stage_package DEST: copies into DEST exactly the files mix.exs's package lists (what a Hex
# user gets), modification times kept (cargo then reuses a build from the same path). Run from
# the repository's root. The checksum file is not in the repository: the release writes it.
stage_package() {
  local dest=$1 files entry path matched
  files=$(HEXAGON_TPU_OFFLINE=1 mix run --no-compile --no-deps-check --no-start \
    -e 'IO.puts(Enum.join(Mix.Project.config()[:package][:files], "\n"))')
  echo "package files:"
  printf '%s\n' "$files" | sed 's/^/  /'
  mkdir -p "$dest"
  while IFS= read -r entry; do
    matched=0
    for path in $entry; do # globs such as checksum-*.exs
      [[ -e "$path" ]] || continue
      matched=1
      mkdir -p "$dest/$(dirname "$path")"
      cp -Rp "$path" "$dest/$path"
    done
    if [[ $matched == 0 && "$entry" != checksum-*.exs ]]; then
      echo "error: mix.exs lists '$entry', which does not exist" >&2
      exit 1
    fi
  done <<<"$files"
}

# hex_user_stage WORK [RELEASE_DIR]: what a Hex user's project needs, laid out in WORK (as
# .ci/hex-install.sh and .ci/firmware.sh use it): WORK/hexagon_tpu, the package as Hex ships
# it with the release's checksum file, and WORK/www/v<version>, the release's artifacts for
# a mirror to serve. RELEASE_DIR holds artifacts/ and the checksum file (RELEASE_OUT_DIR of
# .ci/release-dry-run.sh); without it the dry run is made into WORK/release first. Sets
# hex_release and hex_version. Run from the repository's root.
hex_user_stage() {
  local work=$1 checksum
  hex_release="${2:-}"
  if [ -z "$hex_release" ]; then
    hex_release="$work/release"
    echo "no release folder given: .ci/release-dry-run.sh first"
    RELEASE_OUT_DIR="$hex_release" bash .ci/release-dry-run.sh >/dev/null
  fi
  checksum="$hex_release/checksum-Elixir.HexagonTpu.Native.exs"
  if [ ! -f "$checksum" ] || [ ! -d "$hex_release/artifacts" ]; then
    echo "error: $hex_release lacks artifacts/ or $(basename "$checksum")" >&2
    exit 1
  fi
  hex_version="$(bash .ci/release-dry-run.sh version)"
  stage_package "$work/hexagon_tpu" >/dev/null
  cp "$checksum" "$work/hexagon_tpu/"
  mkdir -p "$work/www/v$hex_version"
  cp "$hex_release"/artifacts/*.tar.gz "$work/www/v$hex_version/"
}

# mirror_serve DIR LOG: a plain HTTP server on 127.0.0.1 serving DIR in the background, its
# request log in LOG (the mirror of the precompiled NIFs a user points nif_base_url at). Run
# inside trixie_run: the server ends with the script's PID namespace. Sets mirror_port; fails
# when the server does not start.
mirror_serve() {
  local dir=$1 log=$2
  python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$dir" >"$log" 2>&1 &
  for _ in $(seq 50); do grep -q "port [0-9]" "$log" && break; sleep 0.1; done
  mirror_port="$(grep -oE "port [0-9]+" "$log" | head -n1 | cut -d" " -f2)"
  if [ -z "$mirror_port" ]; then
    echo "error: the HTTP server did not start: $(cat "$log")" >&2
    exit 1
  fi
}

# arm64_debian_root BASE SUITE PACKAGE...: Debian SUITE's arm64 PACKAGEs (SUITE, its -updates
# and -security), downloaded with a private apt state in BASE (the host's apt configuration,
# architectures and lists are left untouched) and unpacked into BASE/root; prints BASE/root.
# Made once: a root unpacked from another suite or package list is made again. Packages of a
# merged-/usr suite (trixie) ship nothing under /lib, so lib is linked to usr/lib when absent
# (where the ELF interpreter /lib/ld-linux-aarch64.so.1 is looked for). Needs
# debian-archive-keyring on the host.
arm64_debian_root() {
  local base=$1 suite=$2
  shift 2
  local root="$base/root" stamp="$suite: $*"
  if [ -d "$root/usr" ] && [ "$(cat "$base/packages" 2>/dev/null)" = "$stamp" ]; then
    echo "$root"
    return 0
  fi
  local mirror="${DEBIAN_MIRROR:-http://deb.debian.org}"
  local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  mkdir -p "$base/etc" "$base/lists/partial" "$base/cache/archives/partial" "$base/debs"
  cat >"$base/etc/sources.list" <<SOURCES
deb [signed-by=$keyring] $mirror/debian $suite main
deb [signed-by=$keyring] $mirror/debian $suite-updates main
deb [signed-by=$keyring] $mirror/debian-security $suite-security main
SOURCES
  local apt=(apt-get -q -o "Dir::Etc::SourceList=$base/etc/sources.list" -o Dir::Etc::SourceParts=/nonexistent
    -o "Dir::State::Lists=$base/lists" -o "Dir::Cache=$base/cache" -o Debug::NoLocking=1
    -o APT::Architecture=arm64 -o APT::Architectures::=arm64 -o APT::Sandbox::User=root)
  printf '==> downloading Debian %s arm64 packages into %s: %s\n' "$suite" "$base" "$*" >&2
  "${apt[@]}" update >&2
  (cd "$base/debs" && rm -f ./*.deb && "${apt[@]}" download "$@" >&2)
  rm -rf "$root.tmp"
  mkdir -p "$root.tmp"
  local deb
  for deb in "$base"/debs/*.deb; do dpkg-deb -x "$deb" "$root.tmp"; done
  [ -e "$root.tmp/lib" ] || ln -s usr/lib "$root.tmp/lib"
  rm -rf "$root"
  mv "$root.tmp" "$root"
  echo "$stamp" >"$base/packages"
  echo "$root"
}
