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
