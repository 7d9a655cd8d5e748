#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs phaselab's build and test dependencies from Debian 12 packages. Idempotent: does
# nothing when everything is already installed. Needs root (or sudo).
set -euo pipefail
pkgs=(build-essential meson ninja-build pkg-config cmake libhwy-dev libxsimd-dev libtbb-dev
      doctest-dev libbenchmark-dev libtomlplusplus-dev nlohmann-json3-dev libcli11-dev gnuplot-nox
      python3 python3-venv python3-dev ccache
      clang libclang-rt-14-dev openmpi-bin libopenmpi-dev
      clang-format clang-tidy)
if [[ "${PHASELAB_ARM:-0}" == 1 ]]; then
  pkgs+=(g++-aarch64-linux-gnu qemu-user libhwy-dev:arm64 libtbb-dev:arm64 libtomlplusplus-dev:arm64
         libbenchmark-dev:arm64 libxsimd-dev:arm64 libstdc++-12-dev:arm64)
fi
# PHASELAB_SLURM=1 (CI): a one-node Slurm for the sweep.sbatch test (scripts/slurm/local-cluster.sh).
if [[ "${PHASELAB_SLURM:-0}" == 1 ]]; then
  pkgs+=(slurm-wlm munge)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "setup: all dependencies present"
  exit 0
fi
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO=sudo
if [[ "${PHASELAB_ARM:-0}" == 1 ]] && ! dpkg --print-foreign-architectures | grep -q arm64; then
  $SUDO dpkg --add-architecture arm64
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
