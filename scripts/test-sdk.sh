#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The SDK out of tree, as a user meets it: installs a build into a temporary prefix (DESTDIR),
# lets the installed `phaselab new` write the plugin guide's example (the template), builds it
# with meson + pkg-config against that prefix only, runs its tests, runs its config with the
# installed phaselab, and checks that the guide's code excerpts match the template. ~20 s.
#   bash scripts/test-sdk.sh [BUILD_DIR]      (default build; it must be built)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 scripts/check_docs.py
meson install -C "$build" --destdir "$tmp/root" --no-rebuild >/dev/null
pc=$(find "$tmp/root" -name phaselab.pc)
exe=$(find "$tmp/root" -path '*/bin/phaselab')
export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR=$tmp/root
echo "installed: $exe; pkg-config --cflags --libs phaselab:"
echo "  $(pkg-config --cflags --libs phaselab)"
cd "$tmp"
"$exe" new ou_demo | head -1
meson setup ou_demo/build ou_demo >/dev/null
ninja -C ou_demo/build >/dev/null
meson test -C ou_demo/build --print-errorlogs | grep -E '^ *[0-9]+/[0-9]+ '
PHASELAB_PLUGIN_PATH=ou_demo/build "$exe" run ou_demo/ou_demo.toml --out run --quiet
echo "run: $(wc -l < run/results.csv) lines in results.csv; $(cat run/summary.txt)"
PHASELAB_PLUGIN_PATH=ou_demo/build "$exe" list ou_demo | head -2
