#!/usr/bin/env bash
# Cross-compiles phaselab for aarch64 and runs every test suite under qemu-aarch64 (CPU model
# "max": NEON, SVE and SVE2, so every Highway target of the arm build runs). Called by
# scripts/test.sh when PHASELAB_ARM=1 (after scripts/setup.sh installed the :arm64 packages);
# $1 is the counts file the suites append "<binary> <passed> <failed> <skipped>" to.
set -uo pipefail
cd "$(dirname "$0")/.."
counts=${1:-}
dir=build-aarch64
jobs=$(nproc)
echo "== tests (aarch64 under qemu-aarch64 -cpu max: NEON, SVE and SVE2 at 256 bits)"
if [[ ! -f $dir/build.ninja ]]; then
  meson setup "$dir" --cross-file cross/aarch64-linux-gnu.ini --buildtype=release -Dbench=false \
    >/dev/null || { echo "aarch64: meson setup failed"; exit 1; }
fi
ninja -C "$dir" -j "$jobs" >/dev/null || { ninja -C "$dir" -j1 | tail -40; echo "aarch64 build failed"; exit 1; }
# The registry, as the emulated CPU sees it: the arm Highway targets must be there and supported
# (the registry test checks every one of them).
qemu-aarch64 -cpu max,sve-default-vector-length=32 -L /usr/aarch64-linux-gnu "$dir/driver/phaselab" kernels | head -8
# QEMU_CPU/QEMU_LD_PREFIX also reach programs that tests start through binfmt_misc, if registered.
QEMU_CPU=max,sve-default-vector-length=32 QEMU_LD_PREFIX=/usr/aarch64-linux-gnu PHASELAB_TEST_COUNTS=$counts \
  meson test -C "$dir" --num-processes "$jobs" --print-errorlogs --timeout-multiplier 4
