#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The README's first command: installs dependencies, builds, runs the default experiment
# (a small copy-task sweep, softmax vs linear attention) and prints where results and figures are.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
[[ -f build/build.ninja ]] || meson setup build --buildtype=release >/dev/null
echo "quickstart: building phaselab (the first build takes a few minutes; later ones seconds)"
ninja -C build -j "$(nproc)" >/dev/null
out=${1:-runs/copy_default-$(date +%Y%m%d-%H%M%S)}
# phaselab prints where results.csv, run.json and the figures are when the run ends.
exec ./build/driver/phaselab run configs/copy_default.toml --out "$out"
