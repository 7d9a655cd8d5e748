#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The installed tree holds every shipped plugin: `meson install` of this build into a scratch
# DESTDIR, then the installed phaselab (no PHASELAB_PLUGIN_PATH: its own plugin folder) lists the
# five plugins and `phaselab check` passes every shipped config. configs/circuits_from_run.toml
# probes the run folder that configs/markov_checkpoints.toml makes, so its check must name that
# folder as missing. Then the plugin author's on-ramp: `phaselab new walk` and the commands it
# prints, run as written against the installed tree (pkg-config phaselab from the DESTDIR), must
# build the plugin, pass its tests and run its config.
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
# The on-ramp: the commands `phaselab new` prints, as written.
bindir=$(dirname "$exe")
mesondir=$(dirname "$MESON")
export PATH=$bindir:$mesondir:$PATH
pc=$(find "$tmp/root" -name phaselab.pc | head -n 1)
pcdir=$(dirname "$pc")
export PKG_CONFIG_PATH=$pcdir PKG_CONFIG_SYSROOT_DIR=$tmp/root
mkdir -p "$tmp/author" && cd "$tmp/author" || exit 1
printout=$(phaselab new walk 2>&1) || { echo "FAIL: phaselab new: $printout"; exit 1; }
commands=$(grep '^  ' <<<"$printout" | sed 's/^  //')
if [[ -z $commands ]]; then
  echo "FAIL: phaselab new printed no commands: $printout"
  fail=1
elif ! (eval "$commands") >"$tmp/onramp.log" 2>&1; then
  tail -n 30 "$tmp/onramp.log"
  echo "FAIL: the commands phaselab new printed do not work as written:"
  echo "$commands"
  fail=1
elif ! compgen -G "$tmp/author/walk/runs/*/results.csv" >/dev/null; then
  echo "FAIL: the printed commands ran but left no results.csv"
  fail=1
fi
# docs/plugins.md gives the same build and run lines
while read -r line; do
  [[ $line == cd\ * ]] && line=${line#* && }  # the guide has cd on a line of its own
  grep -qF -- "$line" "$root/docs/plugins.md" ||
    { echo "FAIL: docs/plugins.md lacks the printed command: $line"; fail=1; }
done <<<"$commands"
[[ $fail == 0 ]] && echo "ok: 5 plugins installed, $configs configs checked"
exit $fail
