// SPDX-License-Identifier: Apache-2.0
// `phaselab run CONFIG --plan [--shard N|I/N|auto/N] [--threads T] [--out DIR]`: what a run (or
// each shard of it) would take, without running it: points per shard, their share of the
// plugin's cost estimate, the memory check's estimate, and, when DIR holds finished points of
// this config (a run folder or shard folders), CPU and wall seconds calibrated by those points'
// seconds per unit of cost, with the sbatch --mem and --time that fit them.
#pragma once

#include "driver/config.hpp"
#include "driver/plugins.hpp"
#include "driver/run.hpp"

namespace pl::driver {

int plan_run(const RunConfig& cfg, const Plugin& plugin, const RunOptions& opt);

}  // namespace pl::driver
