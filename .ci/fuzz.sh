#!/usr/bin/env bash
# The fuzz targets (native/hexagon_tpu_nif/fuzz, docs/fuzzing.md): builds them with libFuzzer's
# coverage instrumentation on stable Rust, then runs each briefly from the repository's corpus
# (every committed input, crashes found before included, runs first), failing on any crash.
# FUZZ_SECONDS per target (default 20). The `.names` parser's loop is an ExUnit test
# (test/names_fuzz_test.exs), run by the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=.ci/lib.sh
source .ci/lib.sh
# libfuzzer-sys compiles libFuzzer (C++) with the cc crate.
apt_install g++
cd native/hexagon_tpu_nif
seconds="${FUZZ_SECONDS:-20}"
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
host=$(rustc -vV | sed -n 's/^host: //p')

# What `cargo fuzz build --sanitizer none --debug-assertions` passes (cargo-fuzz 0.13), plus
# overflow checks; with --target, build scripts and proc macros stay uninstrumented.
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing \
-Cllvm-args=-simplifycfg-branch-fold-threshold=0 -Cllvm-args=-sanitizer-coverage-stack-depth \
-Cdebug-assertions -Coverflow-checks -Ccodegen-units=1"
cargo build --manifest-path fuzz/Cargo.toml --locked --release --target "$host" --bins \
  --target-dir "$target_dir/fuzz" --config 'profile.release.debug="line-tables-only"'
unset RUSTFLAGS

# The context_binary target reads metadata through qnn_sim's QnnSystem entry points.
cargo build -p qnn_sim --lib --locked
export QNN_SIM_LIB="$target_dir/debug/libqnn_sim.so"

bin="$target_dir/fuzz/$host/release"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for t in context_binary preprocess postprocess quant; do
  printf '\n-- %s: %ss from fuzz/corpus/%s\n' "$t" "$seconds" "$t"
  mkdir -p "$work/$t"
  if ! "$bin/$t" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$work/" \
    "$work/$t" "fuzz/corpus/$t" >"$work/$t.log" 2>&1; then
    tail -40 "$work/$t.log"
    echo ".ci/fuzz.sh: $t crashed; the input is above (and in $work, removed on exit)" >&2
    exit 1
  fi
  # The instrumentation is real: libFuzzer counts coverage from the seeds on.
  inited=$(grep -m1 -o 'INITED cov: [0-9]* ft: [0-9]*' "$work/$t.log" || true)
  done_=$(grep -o 'DONE *cov: [0-9]* ft: [0-9]*' "$work/$t.log" | tail -1 || true)
  runs=$(sed -n 's/^stat::number_of_executed_units: //p' "$work/$t.log")
  echo "$t: ${inited:-no INITED line} -> ${done_:-no DONE line}, $runs executions"
  if ! [[ "$inited" =~ cov:\ [1-9] ]]; then
    echo ".ci/fuzz.sh: $t reports no coverage: the instrumentation is missing" >&2
    exit 1
  fi
done
