#!/usr/bin/env bash
# Cross-builds the cargo workspace for aarch64-unknown-linux-gnu (the Dragon Q6A's
# triple), runs the qnn, qnn_tests and qnn_sim tests under qemu-user (qnn_tests'
# tests/real_stack.rs on Qualcomm's own aarch64 QNN libraries from PyPI's
# onnxruntime-qnn wheel, and natively on the x86-64 wheel's emulator; see
# prepare_real_stack; AARCH64_REAL_QNN=0 leaves them out), checks the NIF's glibc
# floor and, unless AARCH64_BEAM_SMOKE=0, loads the aarch64 NIF alone into Debian's arm64
# BEAM under qemu and calls a few trivial NIFs. Last (the `doctor` step; either switch at 0
# skips it) it runs the doctor, HexagonTpu.diagnose/1, in that BEAM with the aarch64 NIF (and
# .beam files the host's Elixir compiles) on an overlay of the same aarch64 wheel, prints its
# report and checks each finding (DOCTOR_EXPECTED): the libraries pass, the overlay is no
# running system, and the device creation fails for want of a DSP, without a crash or a
# hang; then a prediction through the public API on the aarch64 qnn_sim. Arguments pick
# steps (see the end).
#
# Runs as root on a fresh Debian 12 (installs what it needs with apt-get and
# rustup). Honours CARGO_TARGET_DIR; .ci/release-dry-run.sh reuses this build.
set -euo pipefail

cd "$(dirname "$0")/.."
REPO_ROOT=$(pwd)

TARGET=aarch64-unknown-linux-gnu
CRATE_DIR="$REPO_ROOT/native/hexagon_tpu_nif"
TARGET_DIR="${CARGO_TARGET_DIR:-$CRATE_DIR/target}"
SYSROOT=/usr/aarch64-linux-gnu
# The QAIRT 2.42 runtime on the device needs glibc >= 2.34, so the device has at
# least that; the NIF must not need more.
GLIBC_MAX=2.34
CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/hexagon_tpu-ci"
# What arm64_erlang_root unpacks: erlang-base and the libraries it and the QNN libraries need
# (libQnnSystem.so needs libatomic.so.1; the doctor step opens it).
ARM64_ROOT_PACKAGES=(erlang-base libc6 libgcc-s1 libstdc++6 libtinfo6 zlib1g libsystemd0 libcap2
  libgcrypt20 libgpg-error0 liblz4-1 liblzma5 libzstd1 libatomic1)
# Zero-arity NIFs the BEAM smoke test calls; each must not return false or raise.
SMOKE_NIF_CALLS="nif_loaded counters"
SMOKE_NIF_MODULE="Elixir.HexagonTpu.Native"
# The doctor step (qemu_doctor): where the host compiles hexagon_tpu's .beam files (offline, so
# apart from the suite's _build/test and any Hex build), and what the doctor must find on the
# overlay under qemu: check|status|text its detail contains ({root}: the overlay, {id}: its
# QAIRT build id). Device creation fails at QNN's first call: no Snapdragon SoC under qemu.
DOCTOR_BUILD_ROOT="$REPO_ROOT/_build/aarch64-doctor"
DOCTOR_EXPECTED="
backend_library|ok|{root}/usr/lib/libQnnHtp.so (aarch64, glibc), QAIRT {id}
system_library|ok|{root}/usr/lib/libQnnSystem.so (aarch64, glibc)
stub_library|ok|{root}/usr/lib/libQnnHtpV68Stub.so (aarch64, glibc)
dsp_library_path|ok|DSP_LIBRARY_PATH is \"/usr/lib/dsp\"
skel_library|ok|{root}/usr/lib/dsp/libQnnHtpV68Skel.so (Hexagon)
one_build|ok|backend, stub and skel are QAIRT {id}
fastrpc_device|error|no {root}/dev: {root} is not the root of a running system
cdsprpcd|error|no {root}/proc: {root} is not the root of a running system
remote_heap|error|no {root}/proc or {root}/sys: {root} is not the root of a running system
device_creation|error|logCreate failed with QNN_BACKEND_ERROR_CANNOT_INITIALIZE (4000)
"
# qnn_sim test targets that spawn an aarch64 executable (see run_tests).
QEMU_SKIP_SIM_TESTS="cli"
# Qualcomm's QAIRT 2.51 libraries, from PyPI's onnxruntime-qnn wheels: downloaded at test time
# into a cache, checked against the sha256 PyPI publishes, never committed or redistributed.
# Both sides come from the pins of `mix hexagon_tpu.compile` (priv/compile/requirements.txt):
# the aarch64 device runtime is installed by the core of `mix hexagon_tpu.runtime`
# (priv/compile/hexagon_tpu_runtime.py), which checks the wheel's sha256 pinned there.
REAL_QNN_PINS="$REPO_ROOT/priv/compile/requirements.txt"
REAL_QNN_VERSION="$(sed -n 's/^onnxruntime-qnn==//p' "$REAL_QNN_PINS")"
REAL_QNN_RUNTIME="$REPO_ROOT/priv/compile/hexagon_tpu_runtime.py"
# The x86-64 side (the emulator, and ORT's QNN EP to compile the test binary): the python
# QNN_PYTHON names (.ci/run passes the set-up's venv), or a venv with the same pins.
REAL_QNN_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/hexagon_tpu"
REAL_STACK_TEST="$CRATE_DIR/qnn_tests/tests/real_stack.rs"

# shellcheck source=.ci/lib.sh
source "$REPO_ROOT/.ci/lib.sh"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L $SYSROOT"

log() { printf '\n==> %s\n' "$*"; }

# Every temporary file and folder of this script lives in SCRATCH, removed at exit however the
# script ends (a failed step used to leave its real-stack overlay behind). A step that passes
# still removes its own at once, to give the disk back before the next.
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/hexagon_tpu-aarch64.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT

prerequisites() {
  log "prerequisites: Debian cross toolchain, qemu-user, rustup target $TARGET"
  apt_install gcc-aarch64-linux-gnu libc6-dev-arm64-cross binutils-aarch64-linux-gnu qemu-user
  if ! command -v rustup >/dev/null 2>&1; then
    echo "error: rustup not found (the workspace needs Rust >= 1.91 from rustup)" >&2
    exit 1
  fi
  (cd "$CRATE_DIR" && rustup target add "$TARGET")
  (cd "$CRATE_DIR" && rustc --version && cargo --version)
  qemu-aarch64 --version | head -n1
}

build_release() {
  log "cargo build --release --target $TARGET --workspace"
  (cd "$CRATE_DIR" && cargo build --release --target "$TARGET" --workspace)
}

# The python that compiles the test binary with ORT's QNN EP and whose onnxruntime_qnn holds
# the x86-64 libraries: $QNN_PYTHON, or a venv in the cache with REAL_QNN_PIP_PINS.
real_stack_python() {
  if [ -n "${QNN_PYTHON:-}" ]; then
    echo "$QNN_PYTHON"
    return 0
  fi
  local venv="$REAL_QNN_CACHE/ci-venv-$REAL_QNN_VERSION"
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import onnxruntime_qnn, onnx, numpy' 2>/dev/null; then
    apt_install python3-venv
    log "creating $venv ($REAL_QNN_PINS)" >&2
    rm -rf "$venv"
    python3 -m venv "$venv" >&2
    "$venv/bin/python" -m pip install -q -r "$REAL_QNN_PINS" >&2
  fi
  echo "$venv/bin/python"
}

# Installs the device runtime of the pinned aarch64 wheel into the rootfs overlay $1 with the
# python $2, as `mix hexagon_tpu.runtime --into DIR` does (the wheel fetched once into
# $REAL_QNN_CACHE/wheels, its sha256 checked every time), checks that its four libraries are
# there and sets OVERLAY_BUILD_ID to their QAIRT build id.
install_overlay() {
  local out
  log "installing the device runtime into the overlay $1 ($REAL_QNN_RUNTIME overlay)"
  out=$("$2" "$REAL_QNN_RUNTIME" overlay --into "$1" --cache "$REAL_QNN_CACHE" --requirements "$REAL_QNN_PINS")
  echo "$out"
  OVERLAY_BUILD_ID=$(sed -n 's/^build_id: //p' <<<"$out")
  for lib in libQnnHtp.so libQnnSystem.so libQnnHtpV68Stub.so dsp/libQnnHtpV68Skel.so; do
    [ -f "$1/usr/lib/$lib" ] || { echo "error: the overlay has no usr/lib/$lib" >&2; exit 1; }
  done
}

# Installs the device runtime into a temporary rootfs overlay (install_overlay), compiles the
# test binary on x86-64, checks that the overlay's build id is the binary's (one QAIRT for
# compiler and device), and sets REAL_STACK_{OVERLAY,AARCH64_LIBS,X86_LIBS,BINARY}: the qnn
# tests under qemu then read the overlay's libraries' providers and build ids, and the binary's
# metadata with them.
prepare_real_stack() {
  local py
  py=$(real_stack_python)
  REAL_STACK_OVERLAY=$(mktemp -d -p "$SCRATCH")
  install_overlay "$REAL_STACK_OVERLAY" "$py"
  REAL_STACK_AARCH64_LIBS="$REAL_STACK_OVERLAY/usr/lib"
  local overlay_id=$OVERLAY_BUILD_ID
  REAL_STACK_X86_LIBS=$("$py" -c 'import os, onnxruntime_qnn; print(os.path.dirname(onnxruntime_qnn.__file__))')

  REAL_STACK_WORK=$(mktemp -d -p "$SCRATCH")
  log "compiling the real-stack test binary with ORT's QNN EP ($py)"
  "$py" "$CRATE_DIR/qnn_tests/tests/real_stack_model.py" "$REAL_STACK_WORK" 2>&1 | grep -v '^\s*$' | tail -n 3
  REAL_STACK_BINARY="$REAL_STACK_WORK/real_stack_ctx_qnn.bin"
  [ -f "$REAL_STACK_BINARY" ] || { echo "error: the generator wrote no $REAL_STACK_BINARY" >&2; exit 1; }
  local binary_id
  binary_id=$("$py" "$REAL_QNN_RUNTIME" build-id "$REAL_STACK_BINARY" | sed 's/.*: //')
  echo "overlay runtime build id $overlay_id; compiled binary's build id $binary_id"
  if [ -z "$overlay_id" ] || [ "$overlay_id" != "$binary_id" ]; then
    echo "error: the overlay's runtime ($overlay_id) is not the QAIRT that compiled the binary ($binary_id)" >&2
    exit 1
  fi
}

# Sets REAL_ENV to the environment of the qnn tests on the real stack: $1 the library
# directory, $2 the backend kind (see tests/real_stack.rs), $3 the report file.
real_stack_env() {
  REAL_ENV=("QNN_REAL_SYSTEM_LIB=$1/libQnnSystem.so" "QNN_REAL_BACKEND_LIB=$1/libQnnHtp.so"
    "QNN_REAL_BACKEND_KIND=$2" "QNN_REAL_CONTEXT_BINARY=$REAL_STACK_BINARY" "QNN_REAL_REPORT=$3")
}

# Fails unless every test of tests/real_stack.rs reported `checked` in report $1 ($2 names the run).
check_real_stack_report() {
  local expected checked skipped
  expected=$(grep -c '^#\[test\]' "$REAL_STACK_TEST")
  checked=$(grep -c '^real_stack: checked ' "$1" 2>/dev/null || true)
  skipped=$(grep -c '^real_stack: skipped ' "$1" 2>/dev/null || true)
  echo "$2: real_stack $checked of $expected tests checked against Qualcomm's libraries, $skipped skipped"
  if [ "$checked" -ne "$expected" ] || [ "$skipped" -ne 0 ]; then
    echo "error: $2: the real-stack tests did not all run (report $1)" >&2
    exit 1
  fi
}

run_tests() {
  local real_env=() real_report=""
  if [ "${AARCH64_REAL_QNN:-1}" != "0" ]; then
    local started=$SECONDS
    prepare_real_stack
    real_report=$(mktemp -p "$SCRATCH")
    real_stack_env "$REAL_STACK_AARCH64_LIBS" no-dsp "$real_report"
    real_env=("${REAL_ENV[@]}")
    echo "real stack prepared in $((SECONDS - started)) s: aarch64 libraries in $REAL_STACK_AARCH64_LIBS"
  else
    log "real-stack tests skipped (AARCH64_REAL_QNN=0): tests/real_stack.rs reports itself skipped"
  fi

  # The tests dlopen the aarch64 libqnn_sim.so from next to the test binary, so
  # the cdylib has to exist for this target's debug profile first.
  log "cargo build -p qnn_sim --target $TARGET"
  (cd "$CRATE_DIR" && cargo build -p qnn_sim --target "$TARGET")

  # qemu-user runs the test binaries, but a test that spawns another aarch64
  # executable (qnn_sim's tests/cli.rs runs the qnn-sim-build tool) needs
  # binfmt_misc, which this machine does not have; those run natively in
  # scripts/test.sh instead.
  local sim_tests=() name
  for test_file in "$CRATE_DIR"/qnn_sim/tests/*.rs "$CRATE_DIR"/qnn_sim/tests/*/main.rs; do
    [ -f "$test_file" ] || continue
    case "$test_file" in
      */main.rs) name=$(basename "$(dirname "$test_file")") ;;
      *) name=$(basename "$test_file" .rs) ;;
    esac
    if [[ " $QEMU_SKIP_SIM_TESTS " == *" $name "* ]]; then
      echo "skipping qnn_sim test target '$name' under qemu (it spawns an aarch64 executable)"
      continue
    fi
    sim_tests+=(--test "$name")
  done

  local out status=0
  out=$(mktemp -p "$SCRATCH")
  log "cargo test -p qnn -p qnn_tests --target $TARGET (runner: $CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER)"
  # With the real stack, tests/real_stack.rs runs on the aarch64 wheel's libraries here (they
  # find libstdc++ and libatomic in $SYSROOT through qemu's -L, each other through RPATH $ORIGIN).
  local qnn_started=$SECONDS
  (cd "$CRATE_DIR" && env "${real_env[@]}" cargo test --no-fail-fast -p qnn -p qnn_tests --target "$TARGET") 2>&1 |
    tee -a "$out" || status=$?
  [ -z "$real_report" ] || echo "qnn tests under qemu took $((SECONDS - qnn_started)) s"
  log "cargo test -p qnn_sim --target $TARGET --lib --bins ${sim_tests[*]}"
  (cd "$CRATE_DIR" && cargo test --no-fail-fast -p qnn_sim --target "$TARGET" --lib --bins "${sim_tests[@]}") 2>&1 |
    tee -a "$out" || status=$?

  local passed failed ignored suites
  suites=$(grep -c '^test result:' "$out" || true)
  passed=$(sed -nE 's/^test result: .* ([0-9]+) passed.*/\1/p' "$out" | awk '{s+=$1} END {print s+0}')
  failed=$(sed -nE 's/^test result: .* ([0-9]+) failed.*/\1/p' "$out" | awk '{s+=$1} END {print s+0}')
  ignored=$(sed -nE 's/^test result: .* ([0-9]+) ignored.*/\1/p' "$out" | awk '{s+=$1} END {print s+0}')
  rm -f "$out"

  log "aarch64 tests under qemu: $suites test suites"
  echo "aarch64: $passed passed, $failed failed, $ignored skipped"
  if [ "$status" -ne 0 ] || [ "$failed" -ne 0 ] || [ "$suites" -eq 0 ]; then
    echo "error: aarch64 tests failed (cargo exit $status)" >&2
    exit 1
  fi
  [ -z "$real_report" ] || run_real_stack_native "$real_report"
}

# After the qemu run: checks its real-stack report ($1), then runs tests/real_stack.rs natively
# on the x86-64 wheel's HTP emulator, where the backend comes up.
run_real_stack_native() {
  check_real_stack_report "$1" "aarch64 (qemu, aarch64 wheel)"
  local report status=0 started=$SECONDS
  report=$(mktemp -p "$SCRATCH")
  real_stack_env "$REAL_STACK_X86_LIBS" works "$report"
  log "cargo test -p qnn_tests --test real_stack (x86-64, the emulator in $REAL_STACK_X86_LIBS)"
  (cd "$CRATE_DIR" && env "${REAL_ENV[@]}" cargo test --no-fail-fast -p qnn_tests --test real_stack) || status=$?
  if [ "$status" -ne 0 ]; then
    echo "error: the x86-64 real-stack tests failed (cargo exit $status)" >&2
    exit 1
  fi
  check_real_stack_report "$report" "x86-64 (native, x86-64 wheel)"
  echo "x86-64 real-stack run took $((SECONDS - started)) s"
  rm -rf "$1" "$report" "$REAL_STACK_WORK" "$REAL_STACK_OVERLAY"
}

check_glibc() {
  local lib="$TARGET_DIR/$TARGET/release/libhexagon_tpu_nif.so"
  log "glibc symbol versions required by $lib"
  [ -f "$lib" ] || { echo "error: $lib not found" >&2; exit 1; }
  local versions max
  versions=$(aarch64-linux-gnu-objdump -T "$lib" | grep -oE 'GLIBC_[0-9]+(\.[0-9]+)+' | sort -u -V)
  max=$(printf '%s\n' "$versions" | tail -n1)
  echo "required: $(printf '%s\n' "$versions" | tr '\n' ' ')"
  echo "highest: $max (allowed: GLIBC_$GLIBC_MAX)"
  echo "symbols at $max:"
  aarch64-linux-gnu-objdump -T "$lib" | grep -F "($max)" | awk '{print "  " $NF}'
  if [ "$(printf '%s\n%s\n' "${max#GLIBC_}" "$GLIBC_MAX" | sort -V | tail -n1)" != "$GLIBC_MAX" ]; then
    echo "error: libhexagon_tpu_nif.so needs $max, above GLIBC_$GLIBC_MAX" >&2
    exit 1
  fi
}

# Debian's arm64 erlang-base (OTP 25, JIT), unpacked with its runtime libraries into a cache
# directory (arm64_debian_root in lib.sh: a private apt state, the host's apt configuration
# untouched; a root from another package list is made again).
arm64_erlang_root() {
  local root
  root=$(arm64_debian_root "$CACHE_DIR/arm64-erlang" bookworm "${ARM64_ROOT_PACKAGES[@]}")
  # beam.smp starts its erl_child_setup helper with execve, which the host
  # kernel cannot run without binfmt_misc; run it through qemu instead.
  local bindir
  bindir=$(dirname "$(compgen -G "$root/usr/lib/erlang/erts-*/bin/beam.smp")")
  if [ ! -f "$bindir/erl_child_setup.aarch64" ]; then
    mv "$bindir/erl_child_setup" "$bindir/erl_child_setup.aarch64"
    printf '#!/bin/sh\nexec qemu-aarch64 -L %s %s/erl_child_setup.aarch64 "$@"\n' "$root" "$bindir" \
      >"$bindir/erl_child_setup"
    chmod +x "$bindir/erl_child_setup"
  fi
  echo "$root"
}

# Runs the arm64 beam.smp of root $1 (arm64_erlang_root) under qemu-aarch64 in folder $2,
# killed after $3 seconds, with the VM arguments that follow (after -noshell); returns its exit
# status. Notes from getting this to work:
# - OTP 25's arm64 JIT segfaults at start under qemu-user 7.2 with default
#   flags; +JPperf true (written -JPperf true when calling beam.smp directly)
#   makes it start every time. It also writes /tmp/perf-<pid>.map and
#   /tmp/jit-<pid>.dump, removed below.
# - Debian ships no non-JIT (beam.emu) flavour for arm64.
run_arm64_beam() {
  local root=$1 work=$2 limit=$3
  shift 3
  local erl_root="$root/usr/lib/erlang" bindir status=0 pid watchdog
  bindir=$(dirname "$(compgen -G "$erl_root/erts-*/bin/beam.smp")")
  (
    cd "$work"
    export BINDIR="$bindir" ROOTDIR="$erl_root" EMU=beam PROGNAME=erl HOME="$work"
    exec qemu-aarch64 -L "$root" "$bindir/beam.smp" -JPperf true -- \
      -root "$erl_root" -bindir "$bindir" -progname erl -- -home "$work" -noshell "$@"
  ) &
  pid=$!
  # Its output goes nowhere: a caller may pipe the VM's, and this must not hold the pipe open.
  (sleep "$limit" && kill -9 "$pid" 2>/dev/null) >/dev/null 2>&1 &
  watchdog=$!
  wait "$pid" || status=$?
  kill "$watchdog" 2>/dev/null || true
  wait "$watchdog" 2>/dev/null || true
  rm -f "/tmp/perf-$pid.map" "/tmp/jit-$pid.dump"
  return "$status"
}

# Loads the aarch64 NIF alone (no Elixir) into the arm64 BEAM under qemu-aarch64 and calls
# the zero-arity NIFs in SMOKE_NIF_CALLS.
beam_smoke() {
  apt_install debian-archive-keyring
  local root
  root=$(arm64_erlang_root)
  local lib="$TARGET_DIR/$TARGET/release/libhexagon_tpu_nif"
  [ -f "$lib.so" ] || { echo "error: $lib.so not found" >&2; exit 1; }

  local work
  work=$(mktemp -d -p "$SCRATCH")
  write_smoke_module "$work/hexagon_tpu_nif_smoke.erl"

  log "BEAM smoke test: arm64 beam.smp (qemu-aarch64) loads $lib.so and calls: $SMOKE_NIF_CALLS"
  local status=0
  SMOKE_NIF_LIB="$lib" SMOKE_NIF_MODULE="$SMOKE_NIF_MODULE" SMOKE_NIF_CALLS="$SMOKE_NIF_CALLS" \
    run_arm64_beam "$root" "$work" 600 \
    -eval '{ok, M, B} = compile:file("hexagon_tpu_nif_smoke.erl", [binary, report]),
           {module, M} = code:load_binary(M, "hexagon_tpu_nif_smoke.erl", B),
           M:main().' || status=$?
  rm -rf "$work"
  if [ "$status" -ne 0 ]; then
    echo "error: BEAM smoke test failed (exit $status)" >&2
    exit 1
  fi
}

write_smoke_module() {
  cat >"$1" <<'ERLANG'
%% Loads a NIF library into a module built on the fly and calls some of its
%% zero-arity functions. erlang:load_nif/2 requires every function the library
%% exports to exist in the calling module, so the stub list is learnt from
%% load_nif's own "Function not found" errors.
-module(hexagon_tpu_nif_smoke).
-export([main/0]).

main() ->
    Lib = os:getenv("SMOKE_NIF_LIB"),
    Mod = list_to_atom(os:getenv("SMOKE_NIF_MODULE")),
    Calls = [list_to_atom(C) || C <- string:lexemes(os:getenv("SMOKE_NIF_CALLS", ""), " ")],
    io:format("smoke: ~s.so on ~s (~s, OTP ~s)~n",
              [Lib, erlang:system_info(system_architecture),
               erlang:system_info(emu_flavor), erlang:system_info(otp_release)]),
    Stubs = load(Mod, Lib, [], 500),
    io:format("smoke: loaded ~p with ~b NIFs~n", [Mod, length(Stubs)]),
    Results = [call(Mod, F, Stubs) || F <- Calls],
    case Results =/= [] andalso lists:all(fun(R) -> R end, Results) of
        true -> io:format("smoke: ok~n"), halt(0);
        false -> io:format("smoke: FAILED~n"), halt(1)
    end.

call(Mod, F, Stubs) ->
    case lists:member({F, 0}, Stubs) of
        false ->
            io:format("smoke: ~p/0 is not a NIF of this library~n", [F]),
            false;
        true ->
            try Mod:F() of
                Result ->
                    io:format("smoke: ~p() -> ~0p~n", [F, Result]),
                    Result =/= false
            catch
                Class:Reason ->
                    io:format("smoke: ~p() raised ~p:~0p~n", [F, Class, Reason]),
                    false
            end
    end.

load(_Mod, _Lib, _Stubs, 0) ->
    io:format("smoke: giving up learning the NIF list~n"),
    halt(1);
load(Mod, Lib, Stubs, Tries) ->
    {module, Mod} = code:load_binary(Mod, "smoke", stub_module(Mod, Stubs)),
    case Mod:'$smoke_load'(Lib) of
        ok ->
            Stubs;
        {error, {bad_lib, Msg}} = Error ->
            case re:run(Msg, "Function not found .*:([^:/]+)/([0-9]+)",
                        [{capture, all_but_first, list}]) of
                {match, [Name, Arity]} ->
                    F = list_to_atom(string:trim(Name, both, "'")),
                    code:purge(Mod),
                    code:delete(Mod),
                    load(Mod, Lib, [{F, list_to_integer(Arity)} | Stubs], Tries - 1);
                nomatch ->
                    io:format("smoke: load_nif failed: ~p~n", [Error]),
                    halt(1)
            end;
        Error ->
            io:format("smoke: load_nif failed: ~p~n", [Error]),
            halt(1)
    end.

stub_module(Mod, Stubs) ->
    L = erl_anno:new(1),
    Path = {var, L, 'Path'},
    Load = {function, L, '$smoke_load', 1,
            [{clause, L, [Path], [],
              [{call, L, {remote, L, {atom, L, erlang}, {atom, L, load_nif}},
                [Path, {integer, L, 0}]}]}]},
    Funs = [{function, L, F, A,
             [{clause, L, [{var, L, '_'} || _ <- lists:seq(1, A)], [],
               [{call, L, {remote, L, {atom, L, erlang}, {atom, L, nif_error}},
                 [{atom, L, not_loaded}]}]}]}
            || {F, A} <- Stubs],
    Forms = [{attribute, L, module, Mod},
             {attribute, L, export, [{'$smoke_load', 1} | Stubs]},
             Load | Funs],
    {ok, Mod, Bin} = compile:forms(Forms, [binary, return_errors]),
    Bin.
ERLANG
}

write_smoke_model_spec() {
  cat >"$1" <<'JSON'
{
  "graphs": [
    {
      "name": "smoke",
      "inputs": [
        {"name": "a", "dtype": "u8", "shape": [4], "quant": {"scale": 0.5, "offset": 0}},
        {"name": "b", "dtype": "u8", "shape": [4], "quant": {"scale": 0.5, "offset": 0}}
      ],
      "nodes": [
        {"op": "add", "inputs": ["a", "b"],
         "output": {"name": "sum", "dtype": "u8", "shape": [4], "quant": {"scale": 0.5, "offset": 0}}}
      ],
      "outputs": ["sum"]
    }
  ]
}
JSON
}

# The doctor (HexagonTpu.diagnose/1, the code a board runs) in the arm64 BEAM under qemu, with
# the aarch64 NIF and the package's .beam files (compiled on the host: they are portable), on
# the overlay of the pinned aarch64 wheel (Qualcomm's device libraries). Prints the report, then
# checks each finding against DOCTOR_EXPECTED: the libraries pass; the overlay has no /dev,
# /proc or /sys (not a running system); and the device creation, tried with Qualcomm's aarch64
# libQnnHtp.so under qemu, fails as on a board without a DSP (no Snapdragon SoC), without a
# crash or a hang. Then availability/1 on a backend that opens (the aarch64 qnn_sim named
# libQnnHtp.so) without its stub answers the doctor's first error, reason :diagnosis. Last, a
# prediction through the public API (load_model/2, predict/3) on the aarch64 qnn_sim, checked.
qemu_doctor() {
  local started=$SECONDS
  command -v mix >/dev/null 2>&1 || { echo "error: the doctor step needs Elixir on the host (mix)" >&2; exit 1; }
  apt_install debian-archive-keyring
  local root nif="$TARGET_DIR/$TARGET/release/libhexagon_tpu_nif.so"
  [ -f "$nif" ] || { echo "error: $nif not found (the build step makes it)" >&2; exit 1; }
  root=$(arm64_erlang_root)
  # .beam files load in the OTP release that compiled them or a newer one.
  local otp
  otp=$(erl -noshell -eval 'io:put_chars(erlang:system_info(otp_release)), halt().')
  [ -d "$root/usr/lib/erlang/releases/$otp" ] || {
    echo "error: the host's Elixir runs on OTP $otp, which the arm64 BEAM (Debian 12's) is not" >&2
    exit 1
  }

  local work py
  work=$(mktemp -d -p "$SCRATCH")
  py=$(real_stack_python)
  install_overlay "$work/overlay" "$py"
  log "compiling hexagon_tpu (host, offline, MIX_ENV=prod) into $DOCTOR_BUILD_ROOT"
  HEXAGON_TPU_OFFLINE=1 MIX_ENV=prod MIX_BUILD_ROOT="$DOCTOR_BUILD_ROOT" mix compile
  # hexagon_tpu's folder, and its dependencies' (nimble_options), as a release lays them out:
  # the offline loader takes the NIF from priv/native/ in code:lib_dir(hexagon_tpu). Elixir's
  # own applications come from the host.
  local app
  for app in "$DOCTOR_BUILD_ROOT"/prod/lib/*; do
    mkdir -p "$work/lib/$(basename "$app")"
    cp -R "$app/ebin" "$work/lib/$(basename "$app")/"
  done
  mkdir -p "$work/lib/hexagon_tpu/priv/native"
  cp "$nif" "$work/lib/hexagon_tpu/priv/native/"
  # availability/1 on a backend that opens but whose stub is missing: the aarch64 qnn_sim under
  # the HTP library's name, alone in its folder, so the doctor's cheap checks expect a DSP.
  local sim="$TARGET_DIR/$TARGET/release/libqnn_sim.so"
  [ -f "$sim" ] || { echo "error: $sim not found (the build step makes it)" >&2; exit 1; }
  mkdir -p "$work/sim_as_htp"
  cp "$sim" "$work/sim_as_htp/libQnnHtp.so"
  local elixir_lib
  elixir_lib=$(elixir -e 'IO.write(Path.dirname(:code.lib_dir(:elixir)))')
  write_doctor_script "$work/doctor.exs"
  # The model of the prediction after the doctor, written by the host's own model builder (the
  # format is the same on every architecture).
  (cd "$CRATE_DIR" && cargo build -q -p qnn_sim --bin qnn-sim-build)
  write_smoke_model_spec "$work/smoke.json"
  "$TARGET_DIR/debug/qnn-sim-build" "$work/smoke.json" -o "$work/smoke.bin"

  log "the doctor in the arm64 BEAM (qemu-aarch64) on the overlay $work/overlay"
  local status=0
  ERL_LIBS="$elixir_lib:$work/lib" DOCTOR_ROOT="$work/overlay" DSP_LIBRARY_PATH=/usr/lib/dsp \
    DOCTOR_SIM_AS_HTP="$work/sim_as_htp/libQnnHtp.so" PREDICT_SIM="$sim" PREDICT_MODEL="$work/smoke.bin" \
    run_arm64_beam "$root" "$work" 300 -s elixir start_cli -extra "$work/doctor.exs" |
    tee "$work/report" || status=$?
  if [ "$status" -ne 0 ]; then
    echo "error: the doctor's VM failed (exit $status)" >&2
    exit 1
  fi
  check_doctor_report "$work/report" "$work/overlay" "$OVERLAY_BUILD_ID"
  rm -rf "$work"
  echo "doctor step took $((SECONDS - started)) s"
}

# Compares the doctor's report $1 on the overlay $2 (QAIRT build id $3) with DOCTOR_EXPECTED:
# the same checks in the same order, each with its status and its detail containing the text
# given ({root} and {id} replaced).
check_doctor_report() {
  local report=$1 overlay=$2 id=$3 line mark name rest got=() want=() failed=0
  declare -A status detail
  while IFS= read -r line; do
    case "$line" in
      "✓ "*) mark=ok ;;
      "! "*) mark=warn ;;
      "✗ "*) mark=error ;;
      *) continue ;;
    esac
    rest=${line#* }
    name=${rest%%: *}
    got+=("$name")
    status[$name]=$mark
    detail[$name]=${rest#*: }
  done <"$report"
  local text
  while IFS='|' read -r name mark text; do
    [ -n "$name" ] || continue
    want+=("$name")
    text=${text//\{root\}/$overlay}
    text=${text//\{id\}/$id}
    if [ "${status[$name]:-}" != "$mark" ] || [[ "${detail[$name]:-}" != *"$text"* ]]; then
      echo "error: doctor: $name should be $mark with \"$text\", is ${status[$name]:-missing}: ${detail[$name]:-}" >&2
      failed=1
    fi
  done <<<"$DOCTOR_EXPECTED"
  if [ "${got[*]}" != "${want[*]}" ]; then
    echo "error: doctor: checks ${got[*]}, expected ${want[*]}" >&2
    failed=1
  fi
  [ -n "$id" ] || { echo "error: the overlay's build id is unknown" >&2; failed=1; }
  [ "$failed" -eq 0 ] || exit 1
  echo "doctor: the ${#want[@]} checks on the overlay under qemu are as expected"
}

write_doctor_script() {
  cat >"$1" <<'ELIXIR'
# Run by .ci/aarch64.sh in the arm64 BEAM under qemu: the doctor as a board runs it, on the
# root filesystem DOCTOR_ROOT, with the default options; its report as the mix task prints it.
require Logger

IO.puts(
  "doctor: #{:erlang.system_info(:system_architecture)}, OTP #{:erlang.system_info(:otp_release)}, " <>
    "Elixir #{System.version()}, NIF loaded: #{HexagonTpu.Native.nif_loaded()}"
)

{:ok, _} = Application.ensure_all_started(:hexagon_tpu)
started = System.monotonic_time(:millisecond)
checks = HexagonTpu.diagnose(root: System.fetch_env!("DOCTOR_ROOT"))
took = System.monotonic_time(:millisecond) - started

# QNN's own log lines (Logger, "QNN: ...") from the device creation, before the report.
Process.sleep(200)
Logger.flush()

errors = Enum.count(checks, &(&1.status == :error))
IO.puts(HexagonTpu.Diagnosis.format(checks))
IO.puts("#{errors} of #{length(checks)} checks failed (HexagonTpu.diagnose/1 took #{took} ms)")

# availability/1 once the runtime opens: the first error of the doctor's cheap checks. The
# aarch64 qnn_sim, named as the HTP library, opens; the stub beside it is missing.
sim = System.fetch_env!("DOCTOR_SIM_AS_HTP")

case HexagonTpu.availability(lib_path: sim, system_lib_path: sim) do
  {:error, %HexagonTpu.Error{reason: :diagnosis, message: "stub_library: " <> _ = message}} ->
    IO.puts("availability: {:error, :diagnosis} #{message}")

  other ->
    IO.puts("availability: expected the stub_library diagnosis, got #{inspect(other)}")
    System.halt(1)
end

# One prediction through the public API on the aarch64 qnn_sim: f32 inputs quantized (u8,
# scale 0.5), the backend's add, the u8 output dequantized back to f32; then the context
# closed, after which predict answers :closed, and the ledger holds the graph, not the context.
sim = System.fetch_env!("PREDICT_SIM")
f32 = fn xs -> for x <- xs, into: <<>>, do: <<x::float-32-little>> end

{:ok, model} =
  HexagonTpu.load_model(System.fetch_env!("PREDICT_MODEL"), lib_path: sim, system_lib_path: sim)

inputs = [{{:f, 32}, f32.([1.0, 2.0, 3.5, 4.0])}, {{:f, 32}, f32.([0.5, 0.5, 1.0, 10.0])}]
{:ok, [sum]} = HexagonTpu.predict(model, inputs)
IO.puts("predict: #{inspect(for <<x::float-32-little <- sum>>, do: x)}")

unless sum == f32.([1.5, 2.5, 4.5, 14.0]) do
  IO.puts("predict: expected [1.5, 2.5, 4.5, 14.0]")
  System.halt(1)
end

:ok = HexagonTpu.Context.close(model.context)
{:error, %HexagonTpu.Error{reason: :closed}} = HexagonTpu.predict(model, inputs)
# the graph is still held (model), its context freed with it closed
live = Enum.frequencies_by(HexagonTpu.Stats.live(), & &1.kind)
%{graph: 1} = Map.take(live, [:graph, :context])
IO.puts("predict: after Context.close/1 it answers :closed; live objects: #{inspect(live)}")
ELIXIR
}

# Steps to run: all by default, or the ones named on the command line, e.g.
# `.ci/aarch64.sh build glibc smoke`.
steps=("$@")
[ "${#steps[@]}" -gt 0 ] || steps=(build test glibc smoke doctor)
prerequisites
for step in "${steps[@]}"; do
  case "$step" in
    build) build_release ;;
    test) run_tests ;;
    glibc) check_glibc ;;
    smoke)
      if [ "${AARCH64_BEAM_SMOKE:-1}" != "0" ]; then
        beam_smoke
      else
        log "BEAM smoke test skipped (AARCH64_BEAM_SMOKE=0)"
      fi
      ;;
    doctor)
      if [ "${AARCH64_BEAM_SMOKE:-1}" != "0" ] && [ "${AARCH64_REAL_QNN:-1}" != "0" ]; then
        qemu_doctor
      else
        log "the doctor under qemu skipped (it needs the arm64 BEAM and Qualcomm's libraries: AARCH64_BEAM_SMOKE=0 or AARCH64_REAL_QNN=0)"
      fi
      ;;
    *) echo "error: unknown step '$step' (build, test, glibc, smoke, doctor)" >&2; exit 2 ;;
  esac
done
log "aarch64: ${steps[*]}: passed"
