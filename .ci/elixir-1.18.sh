#!/usr/bin/env bash
# The whole ExUnit suite on a second Elixir, in Hex mode: Debian 13 (trixie) packages Elixir
# 1.18 on OTP 27 (.ci/trixie.sh builds and caches the root filesystem). Inside it:
#
#   * the Hex packages come from their sources (HEXAGON_TPU_HEX_SOURCES: ../shared/hex, mounted
#     read-only), as path dependencies (mix.exs), with Hex installed and HEX_OFFLINE=1: Hex mode
#     in everything but the fetch. Nx, complex and the real :telemetry are there, so the :nx
#     tests and the telemetry tests against :telemetry itself run;
#   * the NIF is RustlerPrecompiled's forced build (HEXAGON_TPU_BUILD=1): Rustler runs cargo
#     (the host's Rust toolchain, mounted) with the test-support feature, into
#     priv/native/hexagon_tpu_nif.so;
#   * Qualcomm's libraries: a QNN venv made inside the root filesystem with trixie's Python 3.13
#     from the same pins (priv/compile/requirements.txt), once per root filesystem, by
#     `mix hexagon_tpu.compile --setup` (the host's venv is Python 3.11's, which trixie lacks),
#     so the :qnn_host suite runs too. The wheel cache ($cache/wheels) is the host's, mounted;
#   * `mix compile --force --warnings-as-errors`, `mix format --check-formatted`, `mix docs
#     --warnings-as-errors` (ex_doc from the sources; its page list printed) and
#     `mix test --warnings-as-errors` against qnn_sim and its model builder that the host built
#     into priv/native/ (bash scripts/test.sh, or this script builds them).
#
# The exit tests run once per method and state here (HEXAGON_TPU_EXIT_RUNS=1; 2 on the host):
# the Debian 12 leg runs the statistical sweep of the same native exit path (32 child VMs on
# the emulator), which the Elixir version does not change; here a run per case proves the
# children start and stop on OTP 27, within CI's time budget.
#
# A full run (no arguments) fails unless the :nx and :qnn_host tests ran (HEXAGON_TPU_TEST_REPORT,
# test/support/run_report.ex); its counts are in _build/elixir-1.18/test-report, printed last.
# The Mix build goes to _build/elixir-1.18/ in the checkout, apart from the host's _build/test.
#
# Extra arguments go to `mix test`, e.g. bash .ci/elixir-1.18.sh test/stats_test.exs
set -euo pipefail

trixie_label=elixir-1.18
# shellcheck source=.ci/trixie.sh
source "$(dirname "${BASH_SOURCE[0]}")/trixie.sh"
root="$trixie_root"
report="$root/_build/elixir-1.18/test-report"

trixie_prepare

# The host-built artifacts the suite loads; build them if the host has not yet.
for file in libqnn_sim.so qnn-sim-build libqnn_fake_rpcmem.so; do
  if [ ! -f "$root/priv/native/$file" ]; then
    trixie_log "priv/native/$file is missing: building the workspace on the host"
    (cd "$root/native/hexagon_tpu_nif" && cargo build --workspace --features hexagon_tpu_nif/test-support)
    "$root/scripts/install-native.sh"
    break
  fi
done

# The host's wheel cache (the older QAIRT wheel of test/support/qnn_host.ex), at the path the
# venv's cache folder inside has it.
host_wheels="$trixie_cache/wheels"
mkdir -p "$host_wheels"
TRIXIE_MOUNTS=("$host_wheels:rw:/root/.cache/hexagon_tpu/wheels")

rm -f "$report"
trixie_log "running the suite in $trixie_rootfs"
started=$SECONDS
# shellcheck disable=SC2016 # expanded inside the chroot
trixie_run MIX_ENV=test HEXAGON_TPU_BUILD=1 MIX_BUILD_ROOT="$root/_build/elixir-1.18" \
  HEXAGON_TPU_EXIT_RUNS=1 HEXAGON_TPU_TEST_REPORT="$report" -- '
  elixir --version | tail -n 1
  echo "==> mix compile --force --warnings-as-errors (Elixir 1.18, Hex mode: deps from $HEXAGON_TPU_HEX_SOURCES, the NIF built by Rustler)"
  mix compile --force --warnings-as-errors
  echo "==> mix format --check-formatted (Elixir 1.18)"
  mix format --check-formatted
  echo "==> mix docs --warnings-as-errors (Elixir 1.18, ex_doc and its dependencies from $HEXAGON_TPU_HEX_SOURCES)"
  # From sources ex_doc is a :test dependency too (mix.exs), so the docs need no second NIF build.
  mix docs --warnings-as-errors --formatter html --output "$MIX_BUILD_ROOT/doc"
  echo "the docs'"'"' pages ($MIX_BUILD_ROOT/doc):"
  (cd "$MIX_BUILD_ROOT/doc" && ls -- *.html | grep -vx -e 404.html -e search.html | paste -sd " " | fold -s -w 100)
  echo "==> Qualcomm'"'"'s QNN stack: mix hexagon_tpu.compile --setup (a venv of Python 3.13, once per root filesystem)"
  mix hexagon_tpu.compile --setup | sed -n "s/^qnn_lib_dir: /the :qnn_host suite runs on /p"
  echo "==> mix test --warnings-as-errors (Elixir 1.18, Hex mode: Nx, :telemetry, qnn_sim, the HTP emulator)"
  # the wheel networks (3 min of compiling and emulating, the same Python task on both legs)
  # run on the Debian 12 leg only
  mix test --warnings-as-errors --exclude wheel_models "$@"
' "$@"
trixie_log "the suite took $((SECONDS - started)) s"

[ -f "$report" ] || trixie_die "the suite wrote no report ($report)"
trixie_log "Debian 13, Elixir 1.18 / OTP 27, Hex mode: $(cat "$report")"
if [ "$#" -eq 0 ]; then
  # A full run must have run the tests the leg exists for, and failed none.
  tags=(nx qnn_host hex_sources)
  # Telemetry.Metrics (HexagonTpu.Telemetry.metrics/0) is tested where the sources hold it.
  if [ -d "$trixie_hex/telemetry_metrics" ]; then
    tags+=(telemetry_metrics)
  else
    trixie_log "no telemetry_metrics in $trixie_hex: the :telemetry_metrics tests did not run"
  fi
  for tag in "${tags[@]}"; do
    count="$(grep -oE "(^| )$tag=[0-9]+" "$report" | cut -d= -f2)"
    [ "${count:-0}" -gt 0 ] || trixie_die "no test tagged :$tag ran on the Debian 13 leg ($(cat "$report"))"
  done
fi
