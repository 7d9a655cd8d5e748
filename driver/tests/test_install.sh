#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The installed tree holds every shipped plugin: `meson install` of this build into a scratch
# DESTDIR, then the installed phaselab (no PHASELAB_PLUGIN_PATH: its own plugin folder) lists the
# five plugins and `phaselab check` passes every shipped config. configs/circuits_from_run.toml
# probes the run folder that configs/markov_checkpoints.toml makes, so its check must name that
# folder as missing.
set -uo pipefail
: "${MESON:?}" "${PHASELAB_BUILD_DIR:?}"
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/phaselab-install-test-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if ! "$MESON" install -C "$PHASELAB_BUILD_DIR" --destdir "$tmp/root" --no-rebuild --quiet \
    >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log"
  echo "FAIL: meson install"
  exit 1
fi
exe=$(find "$tmp/root" -path '*/bin/phaselab' -type f | head -n 1)
kernels=$(find "$tmp/root" -name 'libphaselab_kernels.so*' | head -n 1)
[[ -n $exe && -n $kernels ]] || { echo "FAIL: no installed phaselab or kernel library"; exit 1; }
libdir=$(dirname "$kernels")
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
unset PHASELAB_PLUGIN_PATH
fail=0
configs=0
list=$("$exe" list 2>&1)
for p in copy_task copy_theory markov_icl markov_minimal circuits; do
  if ! grep -q "^$p " <<<"$list"; then
    echo "FAIL: the installed phaselab does not list plugin $p"
    fail=1
  fi
done
cd "$tmp" || exit 1  # run folders named in configs (runs/...) do not exist here
for cfg in "$root"/configs/*.toml; do
  configs=$((configs + 1))
  out=$("$exe" check "$cfg" 2>&1)
  rc=$?
  if [[ $(basename "$cfg") == circuits_from_run.toml ]]; then
    if [[ $rc != 2 || $out != *'circuits.path "runs/markov-checkpoints/checkpoints/p0000-s0" does not exist'* ]]; then
      echo "FAIL: $cfg (no run folder): exit $rc: $out"
      fail=1
    fi
  elif [[ $rc != 0 ]]; then
    echo "FAIL: $cfg: exit $rc: $out"
    fail=1
  fi
done
[[ $fail == 0 ]] && echo "ok: 5 plugins installed, $configs configs checked"
exit $fail
