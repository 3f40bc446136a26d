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
