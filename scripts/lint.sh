#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Style and static checks, run by scripts/test.sh (or alone: scripts/lint.sh [BUILD_DIR]).
#  1. clang-format --dry-run --Werror on every tracked C/C++ file (.clang-format: 100 columns);
#     the X-macro tables (*.def), which clang-format misreads, only get the 100-column check.
#  2. clang-tidy with the checks of .clang-tidy (a short list, each for a class of real bugs) on
#     the driver, plugin and test sources and the kernels' registry and scalar references, using
#     BUILD_DIR's compile_commands.json. The per-ISA SIMD translation units are left out: each
#     *_hwy.cc compiles itself once per Highway target (slow to parse), and their logic is pinned
#     by the kernel suite against the scalar references.
# Exit status 1 when either finds something.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
status=0

if ! clang-format --dry-run --Werror $(git ls-files '*.c' '*.cc' '*.h' '*.hpp' '*.inc'); then
  echo "lint: clang-format: the files above differ from .clang-format (run clang-format -i)"
  status=1
fi
long=$(awk 'length > 100 { print FILENAME ":" FNR ": over 100 columns" }' $(git ls-files '*.def'))
if [[ -n $long ]]; then
  echo "$long"
  status=1
fi

if [[ ! -f $build/compile_commands.json ]]; then
  echo "lint: no $build/compile_commands.json, clang-tidy skipped"
  exit $status
fi
units=$(git ls-files 'driver/*.cc' 'plugins/*.cc' 'tests/*.cc' 'kernels/registry.cc' \
  'kernels/*_scalar.cc' | while read -r f; do
  grep -q "\"../$f\"" "$build/compile_commands.json" && echo "$f"  # built in this tree
done)
findings=$(echo "$units" | xargs -P "$(nproc)" -n 2 clang-tidy -p "$build" --quiet 2>/dev/null \
  | grep -E "(warning|error):")
if [[ -n $findings ]]; then
  echo "$findings"
  echo "lint: clang-tidy: the findings above (.clang-tidy lists the checks)"
  status=1
fi
exit $status
