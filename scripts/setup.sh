# shellcheck shell=bash
# The one set-up path, sourced by scripts/test.sh, scripts/demo.sh and .ci/run: it installs
# what this machine lacks, or stops with one line saying what to run, then exports where
# things are. On a fresh Debian 12 machine with Rust, as root, nothing needs typing.
#
#   Rust (cargo >= 1.91)        not installed here: rustup, see the message
#   a C linker (cc)             apt-get install gcc libc6-dev
#   Elixir >= 1.14              apt-get install elixir erlang-dev erlang-xmerl
#   Hex and nimble_options      from the Hex packages' sources beside the checkout
#                               (scripts/hex-sources.sh), else from hex.pm
#   python3 + venv module       apt-get install python3 python3-venv
#   Qualcomm's QNN stack        `mix hexagon_tpu.compile --setup`: a venv with the pinned
#                               onnxruntime-qnn (priv/compile/requirements.txt) in the cache
#                               folder ($HEXAGON_TPU_CACHE, else ~/.cache/hexagon_tpu)
#   rustfmt, clippy             rustup component add (only with HEXAGON_TPU_SETUP_LINTS=1, .ci/run)
#
# apt-get runs only as root; otherwise the message gives the command. Without the QNN stack
# (no network for pip, or HEXAGON_TPU_QNN_HOST=0) the scripts go on with qnn_sim alone and say
# so. Exports: HEXAGON_TPU_OFFLINE_DEPS and HEX_OFFLINE=1 (when it finds the sources),
# HEXAGON_TPU_QNN_STACK (1 or 0), HEXAGON_TPU_QNN_STACK_NOTE (why not), HEXAGON_TPU_QNN_LIB_DIR
# and HEXAGON_TPU_QNN_PYTHON (when 1). Sets root, crate and target for the sourcing script.
# shellcheck disable=SC2034 # root, crate and target are for the sourcing script

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
crate="$root/native/hexagon_tpu_nif"
target="${CARGO_TARGET_DIR:-$crate/target}"

_setup_me="$(basename "$0")"
_setup_die() {
  echo "$_setup_me: $*" >&2
  exit 1
}

_setup_is_root() { [ "$(id -u)" -eq 0 ]; }

# apt-get install, as root only (returns 1 otherwise, for the caller's message); a failing
# apt-get stops the script. `apt-get update` once per run.
_setup_apt_updated=""
_setup_apt() {
  if ! _setup_is_root || ! command -v apt-get >/dev/null 2>&1; then return 1; fi
  echo "==> apt-get install $*"
  export DEBIAN_FRONTEND=noninteractive
  if [ -z "$_setup_apt_updated" ]; then
    apt-get update -qq >/dev/null || _setup_die "apt-get update failed (is the network or the package mirror reachable?)"
    _setup_apt_updated=1
  fi
  local log
  log="$(mktemp)"
  if ! apt-get install -y -qq --no-install-recommends "$@" >"$log" 2>&1; then
    cat "$log" >&2
    _setup_die "apt-get install $* failed; see apt-get's message above"
  fi
  rm -f "$log"
}

# Rust: rustup puts cargo in ~/.cargo/bin, which a new login shell has on PATH; this one may not.
if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
  # shellcheck source=/dev/null
  . "$HOME/.cargo/env"
fi
command -v cargo >/dev/null 2>&1 ||
  _setup_die "Rust is not installed: install it with rustup (https://rustup.rs: curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh), then run this again"
_setup_rust="$(rustc --version | awk '{print $2}')"
if [ "$(printf '%s\n' 1.91.0 "${_setup_rust%%-*}" | sort -V | head -1)" != 1.91.0 ]; then
  _setup_die "Rust $_setup_rust is older than 1.91, which this workspace needs: run 'rustup update stable', then run this again"
fi

# Debian packages: the required ones, and python3-venv for the QNN stack (which is optional).
# As root, one apt-get for all of them; otherwise one line with the command.
_setup_needed=() _setup_wanted=() _setup_what=()
if ! command -v cc >/dev/null 2>&1; then # Rust links with cc
  _setup_needed+=(gcc libc6-dev) _setup_what+=("a C linker (cc)")
fi
if ! command -v mix >/dev/null 2>&1; then
  _setup_needed+=(elixir erlang-dev erlang-xmerl) _setup_what+=("Elixir (>= 1.14)")
fi
if [ "${HEXAGON_TPU_QNN_HOST:-1}" != 0 ] && ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  command -v python3 >/dev/null 2>&1 || _setup_wanted+=(python3)
  _setup_wanted+=(python3-venv)
fi
if ((${#_setup_needed[@]} + ${#_setup_wanted[@]})); then
  if ! _setup_apt "${_setup_needed[@]}" "${_setup_wanted[@]}" && ((${#_setup_needed[@]})); then
    _setup_list="${_setup_needed[*]} ${_setup_wanted[*]}"
    _setup_missing="${_setup_what[*]}"
    _setup_die "this machine lacks ${_setup_missing//) /) and }: run 'sudo apt-get install -y ${_setup_list% }', then run this again"
  fi
fi

# The VM warns, and Elixir misreads file names, under a non-UTF-8 locale (a bare container has none).
case "${LC_ALL:-${LC_CTYPE:-${LANG:-}}}" in
  *UTF-8* | *utf-8* | *UTF8* | *utf8*) ;;
  *) export LC_ALL=C.UTF-8 ;;
esac

if [ "${HEXAGON_TPU_SETUP_LINTS:-0}" = 1 ]; then
  if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
    command -v rustup >/dev/null 2>&1 ||
      _setup_die "rustfmt or clippy is missing and rustup is not installed: add them to your Rust toolchain, then run this again"
    echo "==> rustup component add rustfmt clippy"
    (cd "$crate" && rustup component add rustfmt clippy)
  fi
fi

# nimble_options, the one Hex package an offline build needs (mix.exs), and Hex, without which
# Mix reads no package's mix.exs: from the Hex packages' sources when a folder of them is beside
# the checkout (scripts/hex-sources.sh; Hex then stays off the network, HEX_OFFLINE=1), else
# from hex.pm (`mix local.hex`, then `mix deps.get` once).
if [ -z "${HEXAGON_TPU_OFFLINE_DEPS:-}" ] &&
  _setup_sources="$(bash "$root/scripts/hex-sources.sh" nimble_options hex)"; then
  export HEXAGON_TPU_OFFLINE_DEPS="$_setup_sources"
fi
[ -z "${HEXAGON_TPU_OFFLINE_DEPS:-}" ] || export HEX_OFFLINE="${HEX_OFFLINE:-1}"
if ! mix archive 2>/dev/null | grep -Eq '^\* hex($|-)'; then
  if [ -d "${HEXAGON_TPU_OFFLINE_DEPS:-}/hex" ]; then
    echo "==> mix archive.install: Hex, built from $HEXAGON_TPU_OFFLINE_DEPS/hex (once)"
    _setup_hex="$(mktemp -d)"
    cp -r "$HEXAGON_TPU_OFFLINE_DEPS/hex" "$_setup_hex/hex"
    (cd "$_setup_hex/hex" && MIX_ENV=prod mix archive.build -o "$_setup_hex/hex.ez" &&
      mix archive.install "$_setup_hex/hex.ez" --force) >"$_setup_hex/log" 2>&1 ||
      { cat "$_setup_hex/log" >&2; _setup_die "Hex could not be built from $HEXAGON_TPU_OFFLINE_DEPS/hex"; }
    rm -rf "$_setup_hex"
  else
    echo "==> mix local.hex (once)"
    mix local.hex --force >/dev/null ||
      _setup_die "Hex could not be installed from hex.pm: set HEXAGON_TPU_OFFLINE_DEPS to a folder of Hex packages' sources holding hex/ and nimble_options/, then run this again"
  fi
fi
if [ -z "${HEXAGON_TPU_OFFLINE_DEPS:-}" ] && [ ! -d "$root/deps/nimble_options" ]; then
  echo "==> mix deps.get (nimble_options from hex.pm, once)"
  (cd "$root" && HEXAGON_TPU_OFFLINE=1 mix deps.get) ||
    _setup_die "nimble_options could not be fetched from hex.pm: set HEXAGON_TPU_OFFLINE_DEPS to a folder holding its sources (nimble_options/), then run this again"
fi

# Qualcomm's QNN stack, from PyPI. Everything above is required; this is not: without it the
# tests and the demo run on qnn_sim alone, and say so.
_setup_qnn_stack() {
  if [ "${HEXAGON_TPU_QNN_HOST:-1}" = 0 ]; then
    HEXAGON_TPU_QNN_STACK_NOTE="HEXAGON_TPU_QNN_HOST=0 is set"
    return 1
  fi
  if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    HEXAGON_TPU_QNN_STACK_NOTE="python3 or its venv module is missing (run 'sudo apt-get install -y python3 python3-venv')"
    return 1
  fi

  # Its progress (stderr) goes to the terminal as it happens; its stdout ends with three lines,
  # `venv: DIR`, `python: PATH` and `qnn_lib_dir: DIR`.
  echo "==> mix hexagon_tpu.compile --setup (Qualcomm's QNN stack from PyPI, once)"
  local out err
  out="$(mktemp)" err="$(mktemp)"
  # stdout to $out, stderr through tee (the pipeline waits for it; pipefail keeps mix's status).
  if ! (cd "$root" && HEXAGON_TPU_OFFLINE="${HEXAGON_TPU_OFFLINE:-1}" mix hexagon_tpu.compile --setup) \
    2>&1 >"$out" | tee "$err" >&2; then
    HEXAGON_TPU_QNN_STACK_NOTE="the venv could not be made: $(cat "$out" "$err" | grep -v '^[[:space:]]*$' | tail -1)"
    rm -f "$out" "$err"
    return 1
  fi
  HEXAGON_TPU_QNN_LIB_DIR="$(sed -n 's/^qnn_lib_dir: //p' "$out" | tail -1)"
  HEXAGON_TPU_QNN_PYTHON="$(sed -n 's/^python: //p' "$out" | tail -1)"
  rm -f "$out" "$err"
  if [ ! -f "$HEXAGON_TPU_QNN_LIB_DIR/libQnnHtp.so" ] || [ ! -x "$HEXAGON_TPU_QNN_PYTHON" ]; then
    HEXAGON_TPU_QNN_STACK_NOTE="mix hexagon_tpu.compile --setup reported no usable venv (qnn_lib_dir '$HEXAGON_TPU_QNN_LIB_DIR', python '$HEXAGON_TPU_QNN_PYTHON')"
    return 1
  fi
}

# .ci/run sources this file and then runs the scripts that source it again: do the venv once.
if [ -z "${HEXAGON_TPU_QNN_STACK:-}" ]; then
  HEXAGON_TPU_QNN_STACK_NOTE="" HEXAGON_TPU_QNN_LIB_DIR="" HEXAGON_TPU_QNN_PYTHON=""
  if _setup_qnn_stack; then HEXAGON_TPU_QNN_STACK=1; else HEXAGON_TPU_QNN_STACK=0; fi
  export HEXAGON_TPU_QNN_STACK HEXAGON_TPU_QNN_STACK_NOTE HEXAGON_TPU_QNN_LIB_DIR HEXAGON_TPU_QNN_PYTHON
fi

if [ "$HEXAGON_TPU_QNN_STACK" = 1 ]; then
  echo "Qualcomm's QNN stack: installed (libraries in $HEXAGON_TPU_QNN_LIB_DIR)"
else
  echo "Qualcomm's QNN stack: not installed, $HEXAGON_TPU_QNN_STACK_NOTE; running on qnn_sim only"
fi
