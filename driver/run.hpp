// SPDX-License-Identifier: Apache-2.0
// `phaselab run`: executes the points of a resolved config in parallel (oneTBB), writes the run
// folder (results, side tables, failures.csv, run.json, figures) and returns the exit status.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "driver/config.hpp"
#include "driver/figures.hpp"
#include "driver/outputs.hpp"
#include "driver/plugins.hpp"
#include "driver/shard.hpp"

namespace pl::driver {

class Progress;

struct RunOptions {
  std::string out;       // --out (else the config's, else runs/<name>-<timestamp>)
  int64_t threads = -1;  // --threads (-1: the config's)
  std::string target;    // --target (else the config's)
  bool resume = false;
  bool quiet = false;
  bool force = false;             // run even if the memory estimate exceeds the machine's memory
  ShardSpec shard;                // --shard I/N (count 0: every point)
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

// One point run by the plugin (create, run, destroy) with the rows it emitted. Used by the local
// workers and by MPI worker ranks (driver/mpi_run.cc), which send it to rank 0.
struct PointOutcome {
  int status = 1;                      // pl_status
  std::string fail_reason;             // first reason given (or an escaped exception)
  std::vector<std::vector<Row>> rows;  // per table, measured cells only
  double seconds = 0;
  bool stop_seen = false;  // a stop (Ctrl-C, SIGTERM) was requested when the point ended
  int rank = 0;            // the MPI rank that ran it
};
PointOutcome compute_point(const pl_plugin& p, const Point& pt, const pl_kernel_table& kt,
                           const std::string& out, int threads, Progress* progress,
                           std::atomic<double>* fraction);
// Ctrl-C / SIGTERM handling shared with the MPI worker ranks.
bool stop_requested();
void install_stop_handlers();
void restore_stop_handlers();
// After the points: the plugin's finish() on the run folder, then its figures (`tool` and
// `have_tool` as render_figures gives them). False if finish failed (reported through progress).
// `title_note` (e.g. "partial: 12 of 20 points") is added to every figure's title.
bool finish_run(const RunConfig& cfg, const Plugin& plugin, const pl_kernel_table& kt,
                const std::string& out, int threads, Progress* progress,
                std::vector<FigureResult>* figs, std::string* tool, bool* have_tool,
                const std::string& title_note = "");
// The kernel table for a target ("" = best); returns select_kernels' error, empty on success
// (every kernel has a scalar variant, so a target check_target accepts always succeeds).
std::string select_kernel_table(const std::string& target, pl_kernel_table* kt);
// Runs worker(0) ... worker(threads - 1) at once in an arena of `threads` threads (no more
// for the whole process meanwhile); when a worker runs out of work its thread joins the others'
// parallel loops.
void run_on_workers(int threads, const std::function<void(int)>& worker);
// Threads for a run: --threads, else [run] threads, 0 = every core this process may use.
int resolve_threads(const RunConfig& cfg, const RunOptions& opt);

std::string cpu_model();
std::string git_commit();

}  // namespace pl::driver
