#!/usr/bin/env bash
# Instructions per output pixel of the preprocessing pass for aarch64 (the Dragon Q6A's
# Cortex-A78/A55), counted under qemu-aarch64, beside OpenCV's aarch64 build doing the same
# steps (issue 31, item 6). Nothing can be timed for the board on an x86-64 machine, so this
# counts the guest instructions executed: insn_count.c, a TCG plugin, adds each translation
# block's instruction count as it runs.
#
#   bash bench/aarch64/count.sh            # the table
#   K1=1 K2=21 bash bench/aarch64/count.sh # more passes between the two counts
#   bash bench/aarch64/count.sh profile [CASE [run|portable]]
#                                          # where our pass's instructions go, by function
#   bash bench/aarch64/count.sh post       # YOLOv8's decode and NMS per frame (u8 and f32),
#                                          # and the host's part of a frame, pre + post
#
# Per case and path, the program runs twice, with K1 and with K2 passes after one warm-up
# pass; (count(K2) - count(K1)) / ((K2 - K1) * output pixels) leaves out start-up (the loader,
# the plan's tables, the frame's making; Python's start and imports). Paths:
#   ours NEON: Plan::run on aarch64 (the kernels chosen at run time: NEON)
#   portable:  Plan::run_portable (the portable bilinear kernels)
#   OpenCV:    bench/opencv_steps.py: cvtColor, resize, copyMakeBorder, LUT, transpose,
#              u8, cv2.setNumThreads(1), in Debian 12's arm64 python3.11 (opencv-python-headless'
#              aarch64 wheel, requirements.txt here)
#   memcpy:    a copy of the output's size (the floor)
# Before counting it checks that OpenCV's output is our pass's, byte for byte, on the same
# frame, and that the plugin counts a program of known length exactly.
#
# `profile` (default letterbox720 run) counts per translated block (the plugin's profile=) and
# names the blocks with addr2line on a build of the driver with line tables, made apart in the
# cache (profile.py); the release build the table counts inlines the pass into a few functions.
#
# Runs as root on a fresh Debian 12 (installs what it needs with apt-get and rustup, as
# .ci/aarch64.sh does); downloads are cached in ~/.cache/hexagon_tpu/aarch64-count. Not part
# of .ci/run: a measurement, not a check. QEMU_CPU (default cortex-a76, QEMU 7.2's model
# nearest the A78: the same Armv8.2 features, dotprod and fp16 among them) is the CPU OpenCV's
# run-time dispatch sees.
set -euo pipefail

cd "$(dirname "$0")/../.."
REPO_ROOT=$(pwd)
HERE="$REPO_ROOT/bench/aarch64"
TARGET=aarch64-unknown-linux-gnu
CRATE_DIR="$REPO_ROOT/native/hexagon_tpu_nif"
TARGET_DIR="${CARGO_TARGET_DIR:-$CRATE_DIR/target}"
SYSROOT=/usr/aarch64-linux-gnu
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/hexagon_tpu/aarch64-count"
QEMU_CPU="${QEMU_CPU:-cortex-a76}"
K1="${K1:-1}"
K2="${K2:-11}"
CASES=(letterbox720 letterbox1080 imagenet224 nearest720)
# Debian 12's python3.11 and the libraries its standard library and the wheels load.
ARM64_PYTHON_PACKAGES=(python3.11-minimal libpython3.11-minimal libpython3.11-stdlib libc6 libexpat1
  zlib1g libssl3 libbz2-1.0 libcrypt1 libffi8 liblzma5 libncursesw6 libtinfo6 libreadline8
  libsqlite3-0 libuuid1 libgcc-s1 libstdc++6)
WHEEL_PLATFORMS=(--platform manylinux_2_28_aarch64 --platform manylinux2014_aarch64
  --python-version 3.11 --implementation cp --only-binary=:all:)

# shellcheck source=.ci/lib.sh
source "$REPO_ROOT/.ci/lib.sh"

log() { printf '\n==> %s\n' "$*" >&2; }

prerequisites() {
  log "prerequisites: gcc, the aarch64 cross toolchain, qemu-user, rustup target $TARGET"
  apt_install gcc libc6-dev gcc-aarch64-linux-gnu libc6-dev-arm64-cross binutils-aarch64-linux-gnu \
    qemu-user debian-archive-keyring
  command -v rustup >/dev/null 2>&1 || { echo "error: rustup not found (the workspace needs Rust >= 1.91)" >&2; exit 1; }
  (cd "$CRATE_DIR" && rustup target add "$TARGET" >&2)
  PIP_PYTHON=python3
  if ! python3 -m pip --version >/dev/null 2>&1; then
    apt_install python3-pip
    PIP_PYTHON=/usr/bin/python3
  fi
  QEMU_VERSION=$(qemu-aarch64 --version | head -n1)
  echo "$QEMU_VERSION" >&2
}

build() {
  mkdir -p "$CACHE"
  log "the plugin: $HERE/insn_count.c -> $CACHE/libinsn_count.so"
  gcc -O2 -Wall -Wextra -Werror -shared -fPIC -fvisibility=hidden -o "$CACHE/libinsn_count.so" "$HERE/insn_count.c"
  log "cargo build --release --target $TARGET -p qnn --example count_preprocess --example count_postprocess"
  (cd "$CRATE_DIR" && nice -n 10 cargo build -q --release --target "$TARGET" -p qnn \
    --example count_preprocess --example count_postprocess)
  DRIVER="$TARGET_DIR/$TARGET/release/examples/count_preprocess"
  POST_DRIVER="$TARGET_DIR/$TARGET/release/examples/count_postprocess"
}

# The arm64 python3.11 root (Debian's packages, .ci/lib.sh's arm64_debian_root) and the wheels
# unpacked into $CACHE/site, hash-checked; made again when requirements.txt changes.
python_root() {
  PY_ROOT=$(arm64_debian_root "$CACHE/arm64-python" bookworm "${ARM64_PYTHON_PACKAGES[@]}")
  PY_SITE="$CACHE/site"
  if ! cmp -s "$HERE/requirements.txt" "$PY_SITE/.requirements.txt" 2>/dev/null; then
    log "OpenCV's and numpy's aarch64 wheels (requirements.txt) into $PY_SITE"
    mkdir -p "$CACHE/wheels"
    "$PIP_PYTHON" -m pip download -q --no-deps --require-hashes "${WHEEL_PLATFORMS[@]}" \
      -d "$CACHE/wheels" -r "$HERE/requirements.txt" >&2
    rm -rf "$PY_SITE"
    "$PIP_PYTHON" -m pip install -q --no-deps --require-hashes --no-index --find-links "$CACHE/wheels" \
      "${WHEEL_PLATFORMS[@]}" --target "$PY_SITE" -r "$HERE/requirements.txt" >&2
    cp "$HERE/requirements.txt" "$PY_SITE/.requirements.txt"
  fi
}

# count OUT PROGRAM ARGS...: PROGRAM under qemu-aarch64 with the plugin; the executed
# instruction count into variable OUT. Ours run with the cross sysroot, python in its root.
count() {
  local -n result=$1
  shift
  local file root=$SYSROOT
  [ "$1" != python ] || { root=$PY_ROOT; set -- "$PY_ROOT/usr/bin/python3.11" "${@:2}"; }
  file=$(mktemp)
  PYTHONPATH="${PY_SITE:-}" OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 \
    qemu-aarch64 -cpu "$QEMU_CPU" -L "$root" -plugin "$CACHE/libinsn_count.so,outfile=$file" "$@" >/dev/null
  result=$(sed -n 's/^insns //p' "$file")
  rm -f "$file"
  [ -n "$result" ] || { echo "error: no count from $*" >&2; exit 1; }
}

# The plugin against a program of known length: known_loop.S runs 2 * N + 4 instructions.
check_plugin() {
  local n got
  for n in 1000 1000000; do
    aarch64-linux-gnu-gcc -nostdlib -static -DITERATIONS=$n -o "$CACHE/known_loop" "$HERE/known_loop.S"
    count got "$CACHE/known_loop"
    echo "plugin check: known_loop.S with $n iterations: $got instructions, expected $((2 * n + 4))" >&2
    [ "$got" -eq $((2 * n + 4)) ] || { echo "error: the plugin miscounts" >&2; exit 1; }
  done
}

# per_pixel OUT PIXELS PROGRAM ARGS...: the difference method (K appended to ARGS), two decimals.
per_pixel() {
  local -n out=$1
  local pixels=$2 a b
  shift 2
  count a "$@" "$K1"
  count b "$@" "$K2"
  out=$(awk -v a="$a" -v b="$b" -v k=$((K2 - K1)) -v p="$pixels" 'BEGIN { printf "%.2f", (b - a) / (k * p) }')
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# profile CASE PATH: our pass's instructions per output pixel by function (profile.py).
profile() {
  local case=$1 path=$2 exe target="$CACHE/target-lines" work out at link bias pixels k
  log "cargo build (line tables) --release --target $TARGET -p qnn --example count_preprocess into $target"
  (cd "$CRATE_DIR" && CARGO_PROFILE_RELEASE_DEBUG=line-tables-only CARGO_TARGET_DIR="$target" \
    nice -n 10 cargo build -q --release --target "$TARGET" -p qnn --example count_preprocess)
  exe="$target/$TARGET/release/examples/count_preprocess"
  work=$(mktemp -d)
  for k in "$K1" "$K2"; do
    out=$(qemu-aarch64 -cpu "$QEMU_CPU" -L "$SYSROOT" \
      -plugin "$CACHE/libinsn_count.so,outfile=/dev/null,profile=$work/$k" "$exe" "$case" "$path" "$k")
  done
  pixels=$(sed -n 's/^pixels \([0-9]*\).*/\1/p' <<<"$out")
  at=$(sed -n 's/.* main_at 0x\([0-9a-f]*\).*/\1/p' <<<"$out")
  link=$(aarch64-linux-gnu-nm -C --defined-only "$exe" | sed -n 's/^\([0-9a-f]*\) T count_preprocess::main$/\1/p')
  bias=$(printf '%x' $((0x$at - 0x$link)))
  echo
  echo "$case, $path: instructions per output pixel, passes $K1 -> $K2 ($QEMU_VERSION, -cpu $QEMU_CPU)"
  python3 "$HERE/profile.py" "$exe" "$bias" "$pixels" $((K2 - K1)) "$work/$K1" "$work/$K2"
  rm -rf "$work"
}

# post: instructions per frame of YOLOv8's decode and NMS (count_postprocess.rs: the head as
# the compile task leaves it, u8 read as it is, or dequantized whole first as predict/3 does by
# default), and the host's part of a frame: letterbox720's pass (NEON) plus the u8 decode at 640.
post() {
  local case path n pre rows=()
  for case in yolov8n640 yolov8n320; do
    for path in u8 f32; do
      per_pixel n 1 "$POST_DRIVER" "$case" "$path"
      rows+=("$(printf '%-12s %-5s %14s' "$case" "$path" "$n")")
      echo "${rows[-1]}" >&2
    done
  done
  per_pixel pre 409600 "$DRIVER" letterbox720 run
  echo
  echo "Instructions per frame, aarch64 under $QEMU_VERSION (-cpu $QEMU_CPU), decodes $K1 -> $K2:"
  printf '%-12s %-5s %14s\n' head path "per frame"
  printf '%s\n' "${rows[@]}"
  awk -v pre="$pre" -v post="${rows[0]##* }" 'BEGIN {
    total = pre * 409600 + post
    printf "host part of a frame, letterbox720 (%.2f per pixel) + yolov8n640 u8: %.0f instructions\n", pre, total
    printf "  at 1 instruction per cycle on a 2.7 GHz Cortex-A78 (a ceiling: its IPC is higher): %.2f ms\n", total / 2.7e6
  }'
}

main() {
  local started=$SECONDS
  prerequisites
  build
  if [ "${1:-table}" = post ]; then
    check_plugin
    post
    return 0
  fi
  if [ "${1:-table}" = profile ]; then
    check_plugin
    profile "${2:-letterbox720}" "${3:-run}"
    return 0
  fi
  [ "${1:-table}" = table ] || { echo "error: unknown step '$1' (table, profile, post)" >&2; exit 2; }
  python_root
  check_plugin
  local work case pixels neon portable opencv floor same rows=()
  work=$(mktemp -d)
  for case in "${CASES[@]}"; do
    log "$case"
    mkdir -p "$work/$case"
    pixels=$(qemu-aarch64 -L "$SYSROOT" "$DRIVER" "$case" run 0 "$work/$case" | sed -n 's/^pixels \([0-9]*\).*/\1/p')
    PYTHONPATH="$PY_SITE" qemu-aarch64 -cpu "$QEMU_CPU" -L "$PY_ROOT" "$PY_ROOT/usr/bin/python3.11" \
      "$REPO_ROOT/bench/opencv_steps.py" "$case" "$work/$case/frame" 0 "$work/$case/opencv" >/dev/null
    if cmp -s "$work/$case/out" "$work/$case/opencv"; then same=yes; else same=NO; fi
    per_pixel neon "$pixels" "$DRIVER" "$case" run
    per_pixel portable "$pixels" "$DRIVER" "$case" portable
    per_pixel floor "$pixels" "$DRIVER" "$case" memcpy
    per_pixel opencv "$pixels" python "$REPO_ROOT/bench/opencv_steps.py" "$case" "$work/$case/frame"
    rows+=("$(printf '%-14s %9s %10s %9s %9s %9s %7s %7s %5s' "$case" "$pixels" "$neon" "$portable" \
      "$opencv" "$floor" "$(ratio "$neon" "$portable")" "$(ratio "$neon" "$opencv")" "$same")")
    echo "${rows[-1]}" >&2
  done
  rm -rf "$work"
  echo
  echo "Instructions per output pixel, aarch64 under $QEMU_VERSION (-cpu $QEMU_CPU), passes $K1 -> $K2:"
  printf '%-14s %9s %10s %9s %9s %9s %7s %7s %5s\n' case pixels "ours NEON" portable OpenCV memcpy \
    NEON/por NEON/CV same
  printf '%s\n' "${rows[@]}"
  echo "(same: OpenCV's output is ours byte for byte; $((SECONDS - started)) s in all)"
}

main "$@"
