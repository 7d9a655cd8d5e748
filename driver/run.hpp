// `phaselab run`: executes the points of a resolved config in parallel (oneTBB), writes the run
// folder (results, side tables, failures.csv, run.json, figures) and returns the exit status.
#pragma once

#include <string>
#include <vector>

#include "driver/config.hpp"
#include "driver/plugins.hpp"

namespace pl::driver {

struct RunOptions {
  std::string out;       // --out (else the config's, else runs/<name>-<timestamp>)
  int64_t threads = -1;  // --threads (-1: the config's)
  std::string target;    // --target (else the config's)
  bool resume = false;
  bool quiet = false;
  bool force = false;             // run even if the memory estimate exceeds the machine's memory
  std::vector<std::string> argv;  // recorded in run.json
};

// Exit codes: 0 ok, 2 usage/config, 3 plugin, 4 a point failed, 5 the run folder could not be
// written (disk full, I/O error: the path and errno are named); 130 interrupted.
enum ExitCode {
  kExitOk = 0,
  kExitUsage = 2,
  kExitPlugin = 3,
  kExitFailed = 4,
  kExitWrite = 5,
  kExitInterrupted = 130
};

int execute_run(const RunConfig& cfg, const Plugin& plugin, const RunOptions& opt);

std::string cpu_model();
std::string git_commit();

}  // namespace pl::driver
