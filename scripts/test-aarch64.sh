#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
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
qemu-aarch64 -cpu max,sve-default-vector-length=32 "$dir/driver/phaselab" kernels | head -8
# The suites through meson (its exe_wrapper is qemu, see the cross file), but not:
# - driver, driver_cancel, scaleout, slurm, search, install: they start the phaselab binary
#   themselves (the driver suite runs below through a wrapper); sharding, merging, MPI, signals,
#   the boundary search and the install layout have no architecture-specific code (the release
#   tree runs them);
# - markov_common, markov_minimal, circuits: the Markov model's plugin logic is
#   architecture-independent and its kernels are the kernel suite's; under emulation these
#   suites take 15+ minutes (the release and sanitizer trees run them).
# The kernel suite's harness sweep runs its cases of at most 2^18 items or FLOPs here (96% of
# the cases, a third of the work; larger shapes take the same code paths, and run natively).
status=0
suites=$(meson test -C "$dir" --list 2>/dev/null | grep -E '^[A-Za-z0-9_-]+$' |
  grep -vxE 'driver|driver_cancel|scaleout|slurm|search|install|reproduce|markov_common|markov_minimal|circuits')
PHASELAB_TEST_COUNTS=$counts PHASELAB_HARNESS_MAX_WORK=262144 \
  meson test -C "$dir" --num-processes "$jobs" --print-errorlogs --timeout-multiplier 4 $suites \
  || status=1
# The driver suite starts the phaselab binary itself (fork + execv). Without binfmt_misc the host
# kernel cannot run an aarch64 binary, so the suite is pointed at a host shell script that
# starts it under qemu (a script is run by the host's /bin/sh even from an emulated process).
wrapper=$dir/qemu-phaselab.sh
cat > "$wrapper" <<EOS
#!/bin/sh
exec qemu-aarch64 -cpu max,sve-default-vector-length=32 "$PWD/$dir/driver/phaselab" "\$@"
EOS
chmod +x "$wrapper"
# The kernel suite once more with 512-bit SVE vectors (16 float lanes; the runs above have 8):
# Highway's SVE code is vector-length agnostic, so its tails and masks are checked at a second
# width too. Only the SVE variants run (PHASELAB_TEST_VARIANTS=.sve: hwy.sve, hwy.sve2); the
# scalar and NEON ones do not depend on the SVE length and ran above. The harness's cases of at
# most 2^14 items or FLOPs and each kernel's smallest (~1/5 of its work; the 256-bit pass above
# runs them all). In the background, next to the driver suite (two cores).
sve512_log=$dir/meson-logs/kernels-sve512.txt
PHASELAB_TEST_COUNTS=$counts PHASELAB_EMULATED=1 PHASELAB_HARNESS_MAX_WORK=16384 \
  PHASELAB_TEST_VARIANTS=.sve \
  qemu-aarch64 -cpu max,sve-default-vector-length=64 "$dir/tests/phaselab_kernel_tests" \
  > "$sve512_log" 2>&1 &
sve512=$!
t512=$SECONDS
if [[ -x $dir/driver/tests/phaselab_driver_tests ]]; then
  echo "driver suite (phaselab started under qemu through $wrapper)"
  t0=$SECONDS
  PHASELAB_EXE=$PWD/$wrapper PHASELAB_TEST_PLUGINS=$PWD/$dir/driver/tests/plugins \
    PHASELAB_TEST_COUNTS=$counts PHASELAB_EMULATED=1 \
    qemu-aarch64 -cpu max,sve-default-vector-length=32 \
    "$dir/driver/tests/phaselab_driver_tests" || status=1
  echo "driver suite: $((SECONDS - t0)) s"
fi
if wait $sve512; then
  echo "kernels (SVE at 512 bits): $(grep 'test cases:' "$sve512_log"), $((SECONDS - t512)) s"
else
  cat "$sve512_log"; echo "kernels (SVE at 512 bits) FAILED"; status=1
fi
exit $status
