#!/usr/bin/env bash
# The README's test command: installs dependencies, builds (release and address/undefined
# sanitizer), runs every test suite and ends with "N passed, N failed, N skipped" (test cases).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
jobs=$(nproc)
counts=$(mktemp)
status=0

build() {  # build DIR [meson options...]
  local dir=$1; shift
  if [[ ! -f $dir/build.ninja ]]; then
    meson setup "$dir" "$@" >/dev/null || return 1
  fi
  ninja -C "$dir" -j "$jobs" >/dev/null || { ninja -C "$dir" -j1 | tail -40; return 1; }
}

run_suite() {  # run_suite DIR LABEL
  local dir=$1 label=$2
  echo "== tests ($label)"
  PHASELAB_TEST_COUNTS=$counts meson test -C "$dir" --num-processes "$jobs" --print-errorlogs \
    || status=1
}

build build --buildtype=release -Dbench=false || { echo "build failed"; status=1; }
[[ -f build/build.ninja ]] && run_suite build release

if [[ "${PHASELAB_SKIP_SANITIZE:-0}" != 1 ]]; then
  build build-sanitize --buildtype=debugoptimized -Db_sanitize=address,undefined \
    -Db_lundef=false -Dbench=false || { echo "sanitizer build failed"; status=1; }
  [[ -f build-sanitize/build.ninja ]] && \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
    run_suite build-sanitize "address,undefined sanitizer"
fi

if [[ "${PHASELAB_ARM:-0}" == 1 ]]; then
  bash scripts/test-aarch64.sh "$counts" || status=1
fi

awk -v st=$status '{p+=$2; f+=$3; s+=$4} END {
  if (NR == 0 || st != 0 && f == 0) f += 1;   # a suite that crashed or failed to build counts
  printf "%d passed, %d failed, %d skipped\n", p, f, s }' "$counts"
rm -f "$counts"
exit $status
