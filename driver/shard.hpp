// SPDX-License-Identifier: Apache-2.0
// Sharding a run for job arrays: `phaselab run CFG --shard I/N` runs a fixed 1/N of the points
// into <out>/shard-I-of-N, `phaselab merge` (driver/merge.hpp) joins the shards. The points are
// dealt round-robin in a fixed pseudo-random order of their indices: shard sizes differ by at
// most one, and every shard gets a random mix of the sweep's cheap and expensive points (large
// P, N, d_model), whatever the grid's shape. A plugin that exports a cost estimate per point
// (phaselab_plugin_point_cost) gets shards of about equal cost instead (greedy, largest first).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "driver/config.hpp"
#include "driver/plugins.hpp"

namespace pl::driver {

struct ShardSpec {
  uint64_t index = 0;  // 0-based
  uint64_t count = 0;  // 0: not sharded
  std::string source;  // where I and N came from ("--shard 2/8", "SLURM_ARRAY_TASK_ID=...")
};

// Parses the value of --shard: "I/N" (0 <= I < N), "auto" (index and count from the scheduler's
// environment) or "auto/N" (index from the environment, count given). `env` looks up a variable
// (nullptr when unset); main passes getenv. On failure returns false with a message.
bool parse_shard(const std::string& text, const char* (*env)(const char*), ShardSpec* out,
                 std::string* error);

// "shard-03-of-16": the index zero-padded to the width of N - 1, so a glob sorts by index.
std::string shard_dir_name(const ShardSpec& s);

// The plugin's cost estimate of each point (its optional phaselab_plugin_point_cost export);
// empty when the plugin has none.
std::vector<double> point_costs(const std::vector<Point>& all, const Plugin& plugin);
// The shard (0..count-1) of each of num_points points: with `costs` (one per point, finite and
// >= 0) the points go, largest first, to the shard with the least cost so far (ties: lowest
// shard; equal costs in the fixed pseudo-random order); without, dealt by count.
std::vector<uint64_t> shard_of_points(uint64_t num_points, uint64_t count,
                                      const std::vector<double>& costs = {});
// The points of shard s, in run order (indices keep their place in the whole run).
std::vector<Point> shard_points(const std::vector<Point>& all, const ShardSpec& s,
                                const std::vector<double>& costs = {});

}  // namespace pl::driver
