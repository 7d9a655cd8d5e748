// SPDX-License-Identifier: Apache-2.0
// `phaselab merge OUT SHARD_DIR...`: joins the folders of `phaselab run --shard I/N` into one run
// folder, as if the run had not been sharded: results.csv, the side tables and failures.csv are
// byte-identical to an unsharded run's (rows in point order), run.json covers every point (with
// the shards it came from), and the plugin's finish() and figures run once on the merged files.
//
// Refused (exit 2, nothing written) when a folder is not a finished shard, when the shards come
// from different configs, phaselab or plugin versions or kernel variants (the differing keys are
// named), when a shard is given twice, or when shards or points are missing (named, with the
// command that runs or finishes them).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "driver/config.hpp"
#include "driver/plugins.hpp"

namespace pl::driver {

struct MergeOptions {
  std::string out;
  std::vector<std::string> shards;
  bool quiet = false;
  bool partial =
      false;  // merge what has finished; run.json says "partial" (a later merge completes it)
  std::vector<std::string> argv;  // recorded in run.json
};

int execute_merge(const MergeOptions& opt);

// The config recorded in a run.json, resolved against the plugin found on the search path (as
// `phaselab run` would resolve the file); false with *error when it cannot be.
bool load_recorded_config(const nlohmann::json& rec, Plugin* plugin, RunConfig* cfg,
                          std::string* error);

}  // namespace pl::driver
