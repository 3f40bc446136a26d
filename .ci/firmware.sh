#!/usr/bin/env bash
# A firmware-shaped test (issue 23): what a Nerves firmware for the Dragon Q6A is — a `mix
# release` of the user's project, built for the board, started in embedded mode by erlinit on
# aarch64 — made and booted here, short of a Nerves system image and the board. Steps, each
# printed:
#
#   1. download and checksum: a user's project (app :my_app) made in a temporary folder inside
#      the Debian 13 root filesystem of .ci/trixie.sh, with examples/nerves/'s application
#      module (HexagonTpu.Monitor and an Nx.Serving) and config/target.exs, depends on
#      hexagon_tpu as the Hex package ships it and on nx, nimble_options, telemetry,
#      rustler_precompiled, castore and complex from their sources in ../shared/hex (hex.pm is
#      out of reach). It is compiled with the settings a Nerves build has
#      (MIX_TARGET=dragon_q6a, MIX_ENV=prod, and the system's TARGET_ARCH=aarch64
#      TARGET_CPU=cortex_a76 TARGET_OS=linux TARGET_ABI=gnu), so rustler_precompiled fetches the aarch64 NIF from a mirror on
#      127.0.0.1 serving RELEASE_DIR's artifacts, and checks it against the checksum file;
#   2. the device runtime: `mix hexagon_tpu.runtime --into rootfs_overlay` in that project
#      (Qualcomm's aarch64 libraries from the pinned onnxruntime-qnn wheel, cached in
#      ~/.cache/hexagon_tpu/wheels as .ci/aarch64.sh caches it; never committed);
#   3. `mix release` with Debian 13's arm64 ERTS and OTP libraries (include_erts: an arm64 erts
#      folder, as Nerves points it at its system's) and examples/nerves/mix.exs's check_nif/1
#      step; then every ELF file in the release must be AArch64 (`file`), the NIF first;
#   4. a root filesystem: the release at /srv/erlang, the overlay, Debian 13's arm64 C
#      libraries, the aarch64 qnn_sim (.ci/aarch64.sh's build step) standing in for the NPU
#      at /usr/lib/libqnn_sim.so, and the pattern classifier (examples/pattern_classifier.json,
#      built by qnn-sim-build) at /data/classifier.bin;
#   5. boot in embedded mode under qemu-aarch64 as erlinit starts it: erlexec with erlinit's
#      environment (ROOTDIR, BINDIR, EMU, PROGNAME, RELEASE_*, and the system's erlinit.config
#      -e variables: DSP_LIBRARY_PATH, ADSP_LIBRARY_PATH), -config sys.config, -boot start,
#      -args_file vm.args (a Nerves project's lines, -mode embedded among them) and
#      -boot_var RELEASE_LIB; the root filesystem is qemu's sysroot (QEMU_LD_PREFIX), so the
#      VM sees /usr/lib/libQnnHtp.so and /data as the board has them. In the booted release,
#      .ci/firmware_check.ex (run by init: vm.args -run) reports the boot, HexagonTpu.diagnose/1
#      with no options (checked here: the overlay's libraries pass, the DSP checks fail as on a
#      machine without one, the device creation fails without a crash), HexagonTpu.predict/3 on
#      qnn_sim and Nx.Serving.batched_run/2 through the application's serving (checked here
#      against the classifier's arithmetic, computed from its JSON), and a Monitor sample;
#   6. SIGTERM: the VM exits with status 0, and nothing of QNN's is on the console (QNN's own
#      <E>/<W>/<I>/<V>/<D> lines, glibc heap reports, panics).
#
#   .ci/firmware.sh [RELEASE_DIR]
#
# RELEASE_DIR as .ci/hex-install.sh takes it (artifacts/ and the checksum file of
# .ci/release-dry-run.sh); without it the dry run is made first. Needs the aarch64 build
# (bash .ci/aarch64.sh build: libqnn_sim.so) and priv/native/qnn-sim-build (bash
# scripts/test.sh). Qualcomm's wheel is downloaded once, and the QNN venv of the root
# filesystem (.ci/elixir-1.18.sh makes it) runs the runtime task; without it the task makes
# one. FIRMWARE_BOOT_TIMEOUT (seconds, default 300) bounds the boot and the check under qemu.
# Runs as root. docs/firmware.md shows a run's log.
#
# Not here: a Nerves system, erlinit itself, fwup and the board; heart (Nerves starts it from
# vm.args; under qemu its timeouts would only measure the emulator).
set -euo pipefail

trixie_label=firmware
# shellcheck source=.ci/trixie.sh
source "$(dirname "${BASH_SOURCE[0]}")/trixie.sh"
# shellcheck source=.ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
root="$trixie_root"
cd "$root"
started=$SECONDS

say() { printf '[firmware] %s\n' "$*"; }
step() { printf '\n==> %s\n' "$*"; }

TARGET=aarch64-unknown-linux-gnu
TARGET_DIR="${CARGO_TARGET_DIR:-$root/native/hexagon_tpu_nif/target}"
SIM="$TARGET_DIR/$TARGET/release/libqnn_sim.so"
# Debian 13's arm64 OTP 27, the release's ERTS and OTP applications (the host's Elixir builds
# the release, on the same OTP), and the C libraries they and Qualcomm's need.
ARM64_PACKAGES=(erlang-base erlang-crypto erlang-asn1 erlang-public-key erlang-ssl erlang-inets
  erlang-runtime-tools libc6 libgcc-s1 libstdc++6 libtinfo6 zlib1g libssl3t64 libzstd1
  libsystemd0 libcap2 libatomic1)
ARM64_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/hexagon_tpu-ci/arm64-erlang-trixie"
# What the system's erlinit.config sets with -e (nerves_system_dragon_q6a,
# rootfs_overlay/etc/erlinit.config), less ORT_DYLIB_PATH and ERL_INETRC (their files are not here).
ERLINIT_ENV=(LANG=en_US.UTF-8 LANGUAGE=en DSP_LIBRARY_PATH=/usr/lib/dsp ADSP_LIBRARY_PATH=/usr/lib/dsp)
# The doctor on the booted release, as a machine without a DSP answers it:
# check|status|text its detail contains ({id}: the overlay's QAIRT build id).
DIAGNOSE_EXPECTED="
backend_library|ok|/usr/lib/libQnnHtp.so (aarch64, glibc), QAIRT {id}
system_library|ok|/usr/lib/libQnnSystem.so (aarch64, glibc)
stub_library|ok|/usr/lib/libQnnHtpV68Stub.so (aarch64, glibc)
dsp_library_path|ok|DSP_LIBRARY_PATH is \"/usr/lib/dsp\"
skel_library|ok|/usr/lib/dsp/libQnnHtpV68Skel.so (Hexagon)
one_build|ok|backend, stub and skel are QAIRT {id}
fastrpc_device|error|no /dev/fastrpc-cdsp* or /dev/adsprpc-smd
cdsprpcd|error|no cdsprpcd process in /proc
remote_heap|error|no device tree
device_creation|error|QNN_BACKEND_ERROR_CANNOT_INITIALIZE (4000)
"
BOOT_TIMEOUT="${FIRMWARE_BOOT_TIMEOUT:-300}"
STOP_TIMEOUT=60

apt_install qemu-user file binutils debian-archive-keyring
for file in "$SIM" priv/native/qnn-sim-build; do
  [ -f "$file" ] || trixie_die "$file is missing (bash .ci/aarch64.sh build; bash scripts/test.sh)"
done

work="$(mktemp -d "${TMPDIR:-/tmp}/hexagon_tpu-firmware.XXXXXX")"
vm_pid=""
cleanup() {
  if [ -n "$vm_pid" ] && kill -0 "$vm_pid" 2>/dev/null; then kill -9 "$vm_pid" 2>/dev/null || true; fi
  [ -z "$vm_pid" ] || rm -f "/tmp/perf-$vm_pid.map" "/tmp/jit-$vm_pid.dump"
  rm -rf "$work"
}
trap cleanup EXIT

# The package as Hex ships it, and the release's artifacts to serve (lib.sh).
hex_user_stage "$work" "${1:-}"
version=$hex_version
nif="libhexagon_tpu_nif-v$version-nif-2.15-$TARGET.so"

arm64="$(arm64_debian_root "$ARM64_CACHE" trixie "${ARM64_PACKAGES[@]}")"
erts="$(compgen -G "$arm64/usr/lib/erlang/erts-*" | head -n1)"
[ -n "$erts" ] || trixie_die "no erts in $arm64/usr/lib/erlang"

trixie_prepare
otp="$(cat "$trixie_rootfs/usr/lib/erlang/releases/"*/OTP_VERSION | head -n1)"
[ -d "$arm64/usr/lib/erlang/releases/${otp%%.*}" ] ||
  trixie_die "the root filesystem's OTP is $otp; the arm64 one ($arm64) is not OTP ${otp%%.*}"
say "arm64 OTP: $(cat "$arm64/usr/lib/erlang/releases/"*/OTP_VERSION) ($(basename "$erts")) from Debian 13 arm64 packages in $arm64; the build's OTP $otp"

TRIXIE_MOUNTS=("$work:rw:/tmp/firmware" "$arm64:ro:/tmp/firmware-arm64"
  "$trixie_cache/wheels:rw:/root/.cache/hexagon_tpu/wheels")
mkdir -p "$trixie_cache/wheels"
chroot_started=$SECONDS
# shellcheck disable=SC2016 # expanded inside the chroot
trixie_run MIX_ENV=prod MIX_TARGET=dragon_q6a TARGET_ARCH=aarch64 TARGET_CPU=cortex_a76 \
  TARGET_OS=linux TARGET_ABI=gnu -- '
  version="$1" nif="$2" erts="/tmp/firmware-arm64/usr/lib/erlang/$3" src="$PWD" w=/tmp/firmware
  sources="$HEXAGON_TPU_HEX_SOURCES"
  unset HEXAGON_TPU_HEX_SOURCES # the user has no such thing
  say() { printf "[firmware] %s\n" "$*"; }
  fail() {
    printf "firmware: %s\n" "$*" >&2
    exit 1
  }
  run() { # run LOG COMMAND...: the command'"'"'s output in LOG, shown when it fails
    local log=$1
    shift
    "$@" >"$log" 2>&1 || { cat "$log"; fail "$* failed"; }
  }
  source "$src/.ci/lib.sh"
  mirror_serve "$w/www" "$w/http.log"
  url="http://127.0.0.1:$mirror_port/v$version"

  echo "==> 1. download and checksum: the user'"'"'s project built for the board (MIX_TARGET=$MIX_TARGET, TARGET_ARCH=${TARGET_ARCH-} TARGET_OS=${TARGET_OS-} TARGET_ABI=${TARGET_ABI-}, MIX_ENV=$MIX_ENV)"
  say "mirror: $url serving $(ls "$w/www/v$version" | tr "\n" " ")"
  app="$w/app"
  mkdir -p "$app/config" "$app/lib/my_app" "$app/rel" "$w/root/data"
  "$src/priv/native/qnn-sim-build" "$src/examples/pattern_classifier.json" -o "$w/root/data/classifier.bin" >/dev/null
  # examples/nerves/ as a user adds it; the check the script judges.
  cp "$src/examples/nerves/lib/my_app/application.ex" "$app/lib/my_app/"
  cp "$src/examples/nerves/config/target.exs" "$app/config/"
  cp "$src/.ci/firmware_check.ex" "$app/lib/"
  check_nif="$(sed -n "/^  defp check_nif(/,/^  end$/p" "$src/examples/nerves/mix.exs")"
  [ -n "$check_nif" ] || fail "examples/nerves/mix.exs has no check_nif/1"
  # examples/nerves/mix.exs less Nerves: its deps by path from their sources (hex.pm is out of
  # reach), the release as Nerves.Release sets it up (no bin/ scripts, ERTS from the target'"'"'s
  # OTP) and written where the root filesystem has it, with the example'"'"'s check_nif/1.
  cat >"$app/mix.exs" <<MIX
defmodule MyApp.MixProject do
  use Mix.Project

  def project do
    [
      app: :my_app,
      version: "0.1.0",
      elixir: "~> 1.17",
      start_permanent: Mix.env() == :prod,
      deps: deps(),
      releases: [my_app: release()]
    ]
  end

  def application do
    [extra_applications: [:logger, :runtime_tools], mod: {MyApp.Application, []}]
  end

  defp deps do
    [{:hexagon_tpu, path: "$w/hexagon_tpu"}] ++
      for name <- ~w(nx nimble_options rustler_precompiled castore telemetry complex)a,
          do: {name, path: Path.join("$sources", Atom.to_string(name)), override: true}
  end

  def release do
    [
      overwrite: true,
      cookie: "my_app_cookie",
      include_executables_for: [],
      include_erts: "$erts",
      path: "$w/root/srv/erlang",
      steps: [:assemble, &check_nif/1],
      strip_beams: true
    ]
  end

$check_nif
end
MIX
  # The mirror setting a user writes (guides/nerves.md, "A mirror of the precompiled NIFs"); config/target.exs
  # as Nerves projects import it; qnn_sim in the root filesystem standing in for the NPU.
  cat >"$app/config/config.exs" <<CONFIG
import Config

config :hexagon_tpu, nif_base_url: "$url"

if Mix.target() != :host, do: import_config("target.exs")

# Logger on the console, above the supervisors'"'"' progress reports (Nerves projects log to
# RingLogger instead).
config :logger, level: :notice

config :my_app, :classifier,
  lib_path: "/usr/lib/libqnn_sim.so",
  system_lib_path: "/usr/lib/libqnn_sim.so"
CONFIG
  # A Nerves project'"'"'s rel/vm.args.eex (mix nerves.new), less heart and the IEx dot file.
  cat >"$app/rel/vm.args.eex" <<VMARGS
+Bc
+C multi_time_warp
-mode embedded
-code_path_choice strict
+sbwt none
+sbwtdcpu none
+sbwtdio none
## qemu-user only: the arm64 JIT does not start under qemu without it (.ci/aarch64.sh).
+JPperf true
-noshell
-user elixir
-run elixir start_cli
## The test'"'"'s check (.ci/firmware_check.ex), run once the release has booted.
-run Elixir.FirmwareCheck run
-extra --no-halt
VMARGS
  cd "$app"
  export RUSTLER_PRECOMPILED_GLOBAL_CACHE_PATH="$w/rustler_precompiled_cache"
  t=$SECONDS
  run "$w/deps.log" mix deps.compile
  gets="$(grep -c "\"GET /v$version/$nif.tar.gz HTTP/1.[01]\" 200" "$w/http.log" || true)"
  [ "$gets" = 1 ] || fail "expected one GET of $nif.tar.gz: $(cat "$w/http.log")"
  ! grep -q "x86_64" "$w/http.log" || fail "an x86-64 artifact was requested: $(cat "$w/http.log")"
  say "download: GET $url/$nif.tar.gz 200 ($(stat -c %s "$w/www/v$version/$nif.tar.gz") bytes), the only request to the mirror"
  sum="$(sha256sum "$RUSTLER_PRECOMPILED_GLOBAL_CACHE_PATH/$nif.tar.gz" | cut -d" " -f1)"
  grep -q "\"$nif.tar.gz\" => \"sha256:$sum\"" "$w/hexagon_tpu/checksum-Elixir.HexagonTpu.Native.exs" ||
    fail "the downloaded artifact sha256 $sum is not the checksum file'"'"'s"
  say "checksum: sha256:$sum, as checksum-Elixir.HexagonTpu.Native.exs says (rustler_precompiled verified it)"
  run "$w/compile.log" mix compile --warnings-as-errors
  say "compiled: hexagon_tpu, nx, nimble_options, telemetry, rustler_precompiled, castore, complex and my_app (examples/nerves application.ex, no warnings) in $((SECONDS - t)) s"

  echo "==> 2. the device runtime: mix hexagon_tpu.runtime --into rootfs_overlay"
  t=$SECONDS
  run "$w/runtime.log" mix hexagon_tpu.runtime --into "$w/rootfs_overlay"
  sed -n "s|^$w/rootfs_overlay/|[firmware] overlay: |p; s/^QAIRT build id /[firmware] overlay: QAIRT build id /p" "$w/runtime.log"
  sed -n "s/^QAIRT build id \([^ ]*\).*/\1/p" "$w/runtime.log" >"$w/qairt-id"
  say "overlay written in $((SECONDS - t)) s"

  echo "==> 3. mix release (MIX_ENV=prod), ERTS $(basename "$erts") of Debian 13 arm64"
  t=$SECONDS
  run "$w/release.log" mix release
  say "release: /srv/erlang: my_app $(cut -d" " -f2 "$w/root/srv/erlang/releases/start_erl.data"), erts $(cut -d" " -f1 "$w/root/srv/erlang/releases/start_erl.data"), $(ls "$w/root/srv/erlang/lib" | wc -l) applications, in $((SECONDS - t)) s; examples/nerves/mix.exs check_nif/1 passed"
' "$version" "$nif" "$(basename "$erts")"
say "the project, the overlay and the release took $((SECONDS - chroot_started)) s"

rel="$work/root/srv/erlang"
sysroot="$work/root"
qairt_id="$(cat "$work/qairt-id")"
[ -n "$qairt_id" ] || trixie_die "mix hexagon_tpu.runtime printed no build id"

# Every ELF file of the release is the board's: the NIF, the ERTS, the OTP applications' NIFs.
lib_nif="$(compgen -G "$rel/lib/hexagon_tpu-*/priv/native/$nif" || true)"
[ -n "$lib_nif" ] || trixie_die "the release has no $nif: $(find "$rel/lib" -path '*hexagon_tpu*' -name '*.so')"
say "NIF: ${lib_nif#"$rel"/}: $(file -b "$lib_nif" | cut -d, -f1-2)"
machine="$(readelf -h "$lib_nif" | sed -nE 's/^[[:space:]]*Machine:[[:space:]]+//p')"
[ "$machine" = AArch64 ] || trixie_die "the release's NIF is built for $machine, not AArch64"
elves=0
while IFS= read -r -d '' f; do
  kind="$(file -b "$f")"
  case "$kind" in
    ELF*"ARM aarch64"*) elves=$((elves + 1)) ;;
    ELF*) trixie_die "${f#"$rel"/} is not an aarch64 ELF file: $kind" ;;
  esac
done < <(find "$rel" -type f -print0)
[ "$elves" -gt 10 ] || trixie_die "only $elves ELF files in the release"
say "every ELF file in the release is ARM aarch64 ($elves files: erts, the NIFs of hexagon_tpu, crypto and asn1)"

step "4. the root filesystem: the release at /srv/erlang, the overlay, qnn_sim, the model"
mkdir -p "$sysroot/usr/lib" "$sysroot/root"
cp -a "$arm64/usr/lib/aarch64-linux-gnu" "$arm64/usr/lib/ld-linux-aarch64.so.1" "$sysroot/usr/lib/"
ln -s usr/lib "$sysroot/lib"
cp -a "$work/rootfs_overlay/." "$sysroot/"
cp "$SIM" "$sysroot/usr/lib/libqnn_sim.so"
say "root: $sysroot"
(cd "$sysroot" && find usr/lib -maxdepth 2 -name '*.so' -path '*Qnn*' | sort | sed 's|^|[firmware]   /|; s|$| (mix hexagon_tpu.runtime)|')
say "  /usr/lib/libqnn_sim.so ($(file -b "$sysroot/usr/lib/libqnn_sim.so" | cut -d, -f2 | sed 's/^ //'): the NPU's stand-in)"
say "  /data/classifier.bin (qnn-sim-build examples/pattern_classifier.json)"
glibc="$(compgen -G "$ARM64_CACHE/debs/libc6_*.deb" | head -n1 | xargs -r basename | cut -d_ -f2)"
say "  /usr/lib/aarch64-linux-gnu (Debian 13 arm64's C libraries: libc6 ${glibc:-?}, libstdc++, libssl, libatomic)"
# qemu-user does not follow execve into another aarch64 program (no binfmt_misc here): the two
# the VM execs, beam.smp (by erlexec) and erl_child_setup (by beam.smp), run through qemu.
bindir="$(compgen -G "$rel/erts-*/bin")"
for prog in beam.smp erl_child_setup; do
  mv "$bindir/$prog" "$bindir/$prog.aarch64"
  printf '#!/bin/sh\nexec qemu-aarch64 "%s/%s.aarch64" "$@"\n' "$bindir" "$prog" >"$bindir/$prog"
  chmod +x "$bindir/$prog"
done

step "5. boot in embedded mode under qemu-aarch64, as erlinit starts the release"
read -r erts_vsn rel_vsn <"$rel/releases/start_erl.data" || true # no newline at its end
reldir="$rel/releases/$rel_vsn"
argv=(-config "$reldir/sys.config" -boot "$reldir/start" -args_file "$reldir/vm.args"
  -boot_var RELEASE_LIB "$rel/lib")
consolidated="$(compgen -G "$rel/lib/*/consolidated" | head -n1 || true)"
[ -z "$consolidated" ] || argv=(-pa "$consolidated" "${argv[@]}")
say "boot: erlexec ${argv[*]//$work/\$W} (\$W=$work)"
say "boot: environment ${ERLINIT_ENV[*]} (the system's erlinit.config), ROOTDIR, BINDIR, EMU=beam, PROGNAME=erlexec, RELEASE_SYS_CONFIG, RELEASE_ROOT (erlinit's); QEMU_LD_PREFIX=\$W/root"
console="$work/console.log"
# The console's input: IEx reads it (vm.args: -user elixir), as on the board's serial console.
# A FIFO this script holds open and never writes: a console nobody types on (at end of input
# IEx would stop the VM).
mkfifo "$work/console.in"
exec 7<>"$work/console.in"
boot_started=$SECONDS
(
  cd "$rel"
  exec env -i HOME="$sysroot/root" PATH=/usr/sbin:/usr/bin:/sbin:/bin TERM=xterm-256color \
    ROOTDIR="$rel" BINDIR="$rel/erts-$erts_vsn/bin" EMU=beam PROGNAME=erlexec \
    RELEASE_SYS_CONFIG="$reldir/sys" RELEASE_ROOT="$rel" RELEASE_TMP=/tmp \
    ERL_CRASH_DUMP="$work/erl_crash.dump" "${ERLINIT_ENV[@]}" QEMU_LD_PREFIX="$sysroot" \
    qemu-aarch64 "$rel/erts-$erts_vsn/bin/erlexec" "${argv[@]}"
) >"$console" 2>&1 <"$work/console.in" &
vm_pid=$!
show_console() { sed 's/^/  | /' "$console" >&2; }
until grep -q 'FIRMWARE done' "$console"; do
  if ! kill -0 "$vm_pid" 2>/dev/null; then
    show_console
    status=0
    wait "$vm_pid" || status=$?
    trixie_die "the VM ended (status $status) before the check was done"
  fi
  if [ $((SECONDS - boot_started)) -gt "$BOOT_TIMEOUT" ]; then
    show_console
    trixie_die "no 'FIRMWARE done' within $BOOT_TIMEOUT s"
  fi
  sleep 1
done
checked_in=$((SECONDS - boot_started))
# The check's lines, without the IEx prompt that shares the console with them.
report="$work/report.log"
sed -nE 's/^(iex\([0-9]+\)> )*(FIRMWARE )/\2/p' "$console" >"$report"
sed -n 's/^FIRMWARE boot /[firmware] boot: /p; s/^FIRMWARE apps /[firmware] applications: /p; s/^FIRMWARE tree /[firmware] supervision tree: /p; s/^FIRMWARE env /[firmware] environment: /p; s/^FIRMWARE nif /[firmware] NIF in the booted release: /p; s/^FIRMWARE availability /[firmware] HexagonTpu.availability\/1 on qnn_sim: /p' "$report"
sed -n 's/^FIRMWARE diagnose /[firmware] diagnose: /p; s/^FIRMWARE diagnosed /[firmware] diagnose: /p' "$report"
sed -n 's/^FIRMWARE predict /[firmware] predict: /p' "$report"
sed -n 's/^FIRMWARE serving /[firmware] Nx.Serving.batched_run(MyApp.Classifier, a {4, 16} batch): /p; s/^FIRMWARE monitor /[firmware] HexagonTpu.Monitor /p' "$report"
say "the check ran $checked_in s after the boot began (qemu-aarch64 emulating every instruction)"

step "6. SIGTERM: the VM stops with status 0, nothing of QNN's on the console"
kill -TERM "$vm_pid"
stop_started=$SECONDS
status=0
(sleep "$STOP_TIMEOUT" && kill -9 "$vm_pid" 2>/dev/null) >/dev/null 2>&1 &
watchdog=$!
wait "$vm_pid" || status=$?
kill "$watchdog" 2>/dev/null || true
wait "$watchdog" 2>/dev/null || true
stopped_in=$((SECONDS - stop_started))
say "stop: SIGTERM sent; the VM exited with status $status in $stopped_in s$(grep -o 'SIGTERM received - shutting down' "$console" | head -n1 | sed 's/^/ (its log: "/; s/$/")/')"

# Judged after the stop, so that a failure still shows how the VM ended.
failures=()
fail_check() { failures+=("$*"); }
grep -q '^FIRMWARE FAIL' "$report" && fail_check "the check raised: $(sed -n '/FIRMWARE FAIL/,/FIRMWARE done/p' "$console")"
grep -q '^FIRMWARE boot embedded mode, .* on aarch64-' "$report" || fail_check "not booted in embedded mode on aarch64"
for child in "MyApp.Classifier running" "HexagonTpu.Monitor running"; do
  grep -q "^FIRMWARE tree .*$child" "$report" || fail_check "MyApp.Supervisor: no '$child'"
done
grep -q "^FIRMWARE nif .*/priv/native/$nif\$" "$report" || fail_check "the booted release's NIF is not $nif"
grep -q '^FIRMWARE availability :ok' "$report" || fail_check "availability/1 on qnn_sim is not :ok"

# The doctor's report, check by check (.ci/aarch64.sh checks the overlay's with --root alike).
declare -A d_status d_detail
d_order=()
while IFS= read -r line; do
  case "$line" in
    "FIRMWARE diagnose ✓ "*) mark=ok ;;
    "FIRMWARE diagnose ! "*) mark=warn ;;
    "FIRMWARE diagnose ✗ "*) mark=error ;;
    *) continue ;;
  esac
  rest=${line#FIRMWARE diagnose ? }
  name=${rest%%: *}
  d_order+=("$name")
  d_status[$name]=$mark
  d_detail[$name]=${rest#*: }
done <"$report"
want=()
while IFS='|' read -r name mark text; do
  [ -n "$name" ] || continue
  want+=("$name")
  text=${text//\{id\}/$qairt_id}
  if [ "${d_status[$name]:-}" != "$mark" ] || [[ "${d_detail[$name]:-}" != *"$text"* ]]; then
    fail_check "diagnose: $name should be $mark with \"$text\", is ${d_status[$name]:-missing}: ${d_detail[$name]:-}"
  fi
done <<<"$DIAGNOSE_EXPECTED"
[ "${d_order[*]}" = "${want[*]}" ] || fail_check "diagnose: checks ${d_order[*]}, expected ${want[*]}"

# The classifier's arithmetic, from its JSON: u8 input (1.0 -> 255), weights quantized per
# channel (half to even), fully connected, the logits quantized, softmax over their values,
# the probabilities quantized. One line per pattern: name logits probabilities.
reference="$(python3 - "$root/examples/pattern_classifier.json" <<'PY'
import json, math, sys
g = json.load(open(sys.argv[1]))["graphs"][0]
const = {c["name"]: c for c in g["constants"]}
fc, sm = g["nodes"]
inq = g["inputs"][0]["quant"]
w = const["weights"]
b = const["bias"]
outs, n = w["shape"]
def quantize(v, scale, offset, lo, hi):
    return min(hi, max(lo, round(v / scale) - offset))
qw = [[quantize(w["values"][k * n + i], w["quant"]["scales"][k], w["quant"]["offsets"][k], -128, 127) for i in range(n)] for k in range(outs)]
lq, pq = fc["output"]["quant"], sm["output"]["quant"]
patterns = {
    "horizontal": lambda r, c: r == 1, "vertical": lambda r, c: c == 2,
    "diagonal": lambda r, c: r == c, "corners": lambda r, c: r in (0, 3) and c in (0, 3),
}
for name, hot in patterns.items():
    x = [quantize(1.0 if hot(r, c) else 0.0, inq["scale"], inq["offset"], 0, 255) for r in range(4) for c in range(4)]
    logits = []
    for k in range(outs):
        acc = sum(x[i] * qw[k][i] for i in range(n)) * inq["scale"] * w["quant"]["scales"][k]
        acc += b["values"][k]
        logits.append(quantize(acc, lq["scale"], lq["offset"], 0, 255))
    values = [(q + lq["offset"]) * lq["scale"] for q in logits]
    e = [math.exp(v - max(values)) for v in values]
    probs = [quantize(v / sum(e), pq["scale"], pq["offset"], 0, 255) for v in e]
    print(name, ",".join(map(str, logits)), ",".join(map(str, probs)))
PY
)"
while read -r name logits probs; do
  grep -q "^FIRMWARE predict $name logits=$logits probabilities=$probs " "$report" ||
    fail_check "predict $name: expected logits=$logits probabilities=$probs, got: $(grep "^FIRMWARE predict $name " "$report" || echo nothing)"
  grep -q "^FIRMWARE serving $name probabilities=$probs\$" "$report" ||
    fail_check "serving $name: expected probabilities=$probs, got: $(grep "^FIRMWARE serving $name " "$report" || echo nothing)"
done <<<"$reference"
grep -q '^FIRMWARE monitor sample: ' "$report" || fail_check "no Monitor sample"

# What QNN (or the C library under it) printed itself, as test/support/exit_runs.ex reads it.
raw="$(sed -E 's/^(iex\([0-9]+\)> )+//' "$console" |
  grep -nE '^\s*<[EWIVD]>|^\s*#\s*LIBNATIVE|malloc|free\(\)|double free|corrupted|munmap_chunk|panicked at' || true)"
[ -z "$raw" ] || fail_check "QNN printed on the console: $raw"
[ "$status" -eq 0 ] || fail_check "the VM exited with status $status after SIGTERM, not 0"

if [ "${#failures[@]}" -gt 0 ]; then
  show_console
  printf 'firmware: %s\n' "${failures[@]}" >&2
  exit 1
fi
step "the verdict"
say "boot: a release built for the board (every ELF file aarch64, the NIF from the mirror, checksum checked) booted in embedded mode with the example's supervision tree running"
say "diagnose: as a machine without a DSP answers it: the overlay's libraries found where the device looks, one QAIRT build ($qairt_id), no FastRPC device, cdsprpcd or device tree, the device creation refused by QNN without a crash"
say "predict: the u8 codes of the four patterns, on HexagonTpu.predict/3 and through the Nx.Serving, are the classifier's arithmetic (computed from examples/pattern_classifier.json), the f32 outputs those codes dequantized exactly"
say "stop: exit status 0 after SIGTERM; $(wc -l <"$console") console lines, none of QNN's own (<E>/<W>/<I>/<V>/<D>, heap reports, panics): QNN's log reached Logger ($(grep -c '\[error\] QNN: ' "$console") lines, e.g. \"$(grep -o '\[error\] QNN: .*' "$console" | head -n1)\")"
say "the firmware-shaped test passed in $((SECONDS - started)) s"
