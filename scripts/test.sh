#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The README's test command: installs dependencies, builds (release and address/undefined
# sanitizer), checks formatting and runs clang-tidy (scripts/lint.sh), runs every test suite and
# ends with "N passed, N failed, N skipped" (test cases).
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
# The SDK out of tree: install into a temporary prefix, build the plugin guide's example with
# pkg-config, test and run it with the installed phaselab (one counted case).
if [[ -f build/build.ninja ]]; then
  echo "== SDK out of tree (scripts/test-sdk.sh)"
  if bash scripts/test-sdk.sh build; then echo "sdk-out-of-tree 1 0 0" >> "$counts"
  else echo "sdk-out-of-tree 0 1 0" >> "$counts"; status=1; fi
fi

# The Python package (scripts/test-python.sh): `pip install .` into a fresh venv (timed), then
# tests/python with pytest (the kernels against NumPy, load() against the CSVs, checkpoints
# against the safetensors package, overrides, errors, the docs/python.md example); its test
# cases count. Needs PyPI (meson-python, nanobind, numpy, pandas, pytest, safetensors,
# matplotlib); PHASELAB_SKIP_PYTHON=1 skips it. Native only (scripts/test-aarch64.sh has none).
if [[ "${PHASELAB_SKIP_PYTHON:-0}" != 1 ]]; then
  echo "== Python package (scripts/test-python.sh)"
  bash scripts/test-python.sh "$counts" || status=1
fi

# Formatting and static checks (scripts/lint.sh: clang-format on every tracked C/C++ file,
# clang-tidy with .clang-tidy's checks on the release tree): a finding fails the run.
echo "== lint (clang-format, clang-tidy)"
bash scripts/lint.sh build || { echo "lint failed"; status=1; }

if [[ "${PHASELAB_SKIP_SANITIZE:-0}" != 1 ]]; then
  # No MPI here: Open MPI's own allocations would read as leaks; the release tree tests mpirun.
  # -O1 -g1 (line tables: file:line in every report): the sanitizer tree compiles ~40% faster
  # than at -O2 -g (GCC 12 on the Highway kernels), the slowest stage of this script; asserts on.
  build build-sanitize --buildtype=plain -Doptimization=1 -Dcpp_args=-g1 -Dc_args=-g1 \
    -Db_ndebug=false -Db_sanitize=address,undefined -Db_lundef=false -Dbench=false -Dmpi=disabled \
    || { echo "sanitizer build failed"; status=1; }
  [[ -f build-sanitize/build.ninja ]] && \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
    run_suite build-sanitize "address,undefined sanitizer"
fi

# libFuzzer, a short fixed time each: config checking (PHASELAB_FUZZ_SECONDS, default 25, from the
# shipped configs as seeds), `phaselab plot`'s series syntax and CSV reading, and checkpoint
# headers (PHASELAB_FUZZ_SECONDS_OTHERS, default 10); one test case each. Longer runs: README
# (Fuzzing).
if [[ "${PHASELAB_SKIP_FUZZ:-0}" != 1 ]]; then
  echo "== fuzz (config checking ${PHASELAB_FUZZ_SECONDS:-25} s; plot series and checkpoint headers ${PHASELAB_FUZZ_SECONDS_OTHERS:-10} s each)"
  fuzz_built=0
  targets="phaselab_config_fuzz phaselab_plot_series_fuzz phaselab_checkpoint_fuzz"
  if command -v clang++ >/dev/null; then
    [[ -f build-fuzz/build.ninja ]] || CC=clang CXX=clang++ meson setup build-fuzz -Dfuzz=true \
      -Dtests=false -Dbench=false --buildtype=debugoptimized >/dev/null
    # Only the fuzz targets (no kernels or plugins are built in this tree).
    ninja -C build-fuzz $(for t in $targets; do echo "driver/fuzz/$t"; done) >/dev/null \
      && fuzz_built=1
  fi
  if ((fuzz_built)); then
    for t in $targets; do
      corpus=$(mktemp -d)
      seconds=${PHASELAB_FUZZ_SECONDS_OTHERS:-10} seeds=()
      [[ $t == phaselab_config_fuzz ]] && seconds=${PHASELAB_FUZZ_SECONDS:-25} seeds=(configs)
      if build-fuzz/driver/fuzz/$t -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
           -print_final_stats=1 "$corpus" "${seeds[@]}" >"build-fuzz/$t.log" 2>&1; then
        echo "fuzz-${t#phaselab_} 1 0 0" >>"$counts"
        echo "$t: $(grep -E "^stat::number_of_executed_units" "build-fuzz/$t.log" || true)"
      else
        tail -40 "build-fuzz/$t.log"
        echo "fuzz-${t#phaselab_} 0 1 0" >>"$counts"
        status=1
      fi
      rm -rf "$corpus"
    done
  else
    echo "fuzz: clang or its libFuzzer runtime missing (scripts/setup.sh installs them): skipped"
    echo "fuzz 0 0 1" >>"$counts"
  fi
fi

if [[ "${PHASELAB_ARM:-0}" == 1 ]]; then
  bash scripts/test-aarch64.sh "$counts" || status=1
fi

awk -v st=$status '{p+=$2; f+=$3; s+=$4} END {
  if (NR == 0 || st != 0 && f == 0) f += 1;   # a suite that crashed or failed to build counts
  printf "%d passed, %d failed, %d skipped\n", p, f, s }' "$counts"
rm -f "$counts"
exit $status
