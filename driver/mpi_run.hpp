// SPDX-License-Identifier: Apache-2.0
// `mpirun -n R phaselab run CFG`: the ranks share one run. Rank 0 writes the run folder (as a
// one-process run does: finished points in batches, on the recorder thread, off the dispatcher's
// path) and runs points with its own threads; it hands the others to the threads of ranks 1..R-1
// one point per request, in the run's order (costliest first where the plugin has an estimate),
// so a thread never waits behind another's queue and a long point never holds back the rest;
// a rank's thread with nothing left joins the points still running on its rank. A boundary search
// ([search]) hands out each round's points the same way; between rounds the workers wait (their
// requests answered "ask again") until rank 0 has the next round's labels. Every rank reads
// the config itself; rank 0 sends the run folder and the kernel target, so every rank computes with
// the same kernel variants.
//
// Built when meson finds MPI (option -Dmpi=auto|enabled|disabled). MPI is initialised only when
// the process was started by an MPI launcher with more than one rank; a build without MPI
// refuses such a launch (every rank would write the same folder).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "driver/run.hpp"

namespace pl::driver {

// Whether this build has MPI.
bool mpi_built();
// Called by `phaselab run` before anything else. Returns false with a message when launched by
// mpirun with several ranks but built without MPI, or when MPI cannot start.
bool mpi_start(int* argc, char*** argv, std::string* error);
int mpi_size();  // 1 when not under MPI
int mpi_rank();

// Where rank 0 takes the points it hands to worker ranks: take(k) returns up to k point indices
// and `left` the points not yet handed out; *more false once no point will ever come again. A
// boundary search between rounds has none to give but more to come: the workers ask again.
struct PointSource {
  std::function<std::vector<uint64_t>(size_t k, size_t* left, bool* more)> take;
};
// The fixed list `todo`, shared through `next` with rank 0's own threads.
PointSource list_source(const std::vector<uint64_t>& todo, std::atomic<size_t>* next);

// Rank 0, in execute_run: sends the run folder and kernel target to the workers, runs
// `run_local` (rank 0's own threads, taking points from the same source) on a second thread and
// serves the worker ranks from `source`, calling `record` for each point they finish. Returns
// when every rank is done.
bool mpi_coordinate(const PointSource& source, const std::string& out, const std::string& target,
                    const std::function<void()>& run_local,
                    const std::function<void(uint64_t, PointOutcome&&)>& record,
                    std::string* error);
// Ranks 1..R-1, instead of execute_run: ask rank 0 for points until it has none left.
int mpi_worker(const RunConfig& cfg, const Plugin& plugin, const RunOptions& opt);
// Last call of every rank: releases the workers when rank 0 stopped before handing out points
// (a config or folder error), then finalises MPI. Returns `code`.
int mpi_end(int code);

}  // namespace pl::driver
