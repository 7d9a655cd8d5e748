#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Python package from a fresh venv: `python3 -m pip install .` from this tree (timed; pip
# fetches meson-python, meson, ninja and nanobind from PyPI into its build environment, and
# numpy and pandas), then pytest, safetensors and matplotlib, then tests/python (the package
# against NumPy float64, csv, run.json and the safetensors package; the docs/python.md example).
# Ends with "python N passed, N failed, N skipped"; with COUNTS_FILE appends
# "python P F S" to it (scripts/test.sh's tally).
# PHASELAB_PY_BUILD_DIR: meson-python's build folder (default build-python, kept between runs;
# with ccache the objects of the release tree are reused). Native trees only: it builds and
# runs the package on this machine.
set -uo pipefail
cd "$(dirname "$0")/.."
counts=${1:-}
tally() {  # tally P F S
  echo "python $1 passed, $2 failed, $3 skipped"
  [[ -n $counts ]] && echo "python $1 $2 $3" >> "$counts"
}
tmp=$(mktemp -d /tmp/phaselab-python-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if ! python3 -m venv "$tmp/venv"; then
  echo "test-python: python3 -m venv failed (Debian: apt-get install python3-venv)"
  tally 0 1 0; exit 1
fi
py=$tmp/venv/bin/python
build_dir=${PHASELAB_PY_BUILD_DIR:-build-python}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(pwd)}
start=$(date +%s%N)
if ! "$py" -m pip install -q --config-settings=build-dir="$build_dir" . > "$tmp/pip.log" 2>&1; then
  tail -40 "$tmp/pip.log"
  echo "test-python: pip install . failed"
  tally 0 1 0; exit 1
fi
tenths=$((($(date +%s%N) - start) / 100000000))
echo "test-python: pip install . took $((tenths / 10)).$((tenths % 10)) s"
if ! "$py" -m pip install -q pytest safetensors matplotlib > "$tmp/pip-test.log" 2>&1; then
  tail -20 "$tmp/pip-test.log"
  echo "test-python: pip install pytest safetensors matplotlib failed"
  tally 0 1 0; exit 1
fi
# From outside the tree, so that `import phaselab` is the installed package.
repo=$(pwd)
(cd "$tmp" && MPLBACKEND=Agg "$py" -m pytest -q -p no:cacheprovider "$repo/tests/python" \
  2>&1 | tee "$tmp/pytest.log" | tail -25)
line=$(grep -E "[0-9]+ (passed|failed|error)" "$tmp/pytest.log" | tail -1)
# "3 failed, 69 passed, 1 skipped, 2 errors in 4.1s": errors count as failures.
read -r p f s < <(awk '{for (i = 2; i <= NF; i++) {n = $(i - 1) + 0
  if ($i ~ /^passed/) p += n; if ($i ~ /^(failed|errors?)/) f += n; if ($i ~ /^skipped/) s += n}}
  END {print p + 0, f + 0, s + 0}' <<<"$line")
[[ -z $line ]] && f=1  # pytest did not get as far as its summary
tally "$p" "$f" "$s"
((f == 0))
