// SPDX-License-Identifier: Apache-2.0
// phaselab_bench: Google Benchmark over every kernel x runnable variant x size family.
// The kernels' benchmarks come from their harness cases (kernels/<family>/cases_*.cc); the
// FMA peak (bench_peak.cc) and the variants kept for comparison (bench/dev) register their own.
#include <benchmark/benchmark.h>

#include <cstdio>

#include "phaselab/kernels.hpp"

namespace pl::bench {
void register_harness_cases();  // harness_bench.cc
}

int main(int argc, char** argv) {
  pl::bench::register_harness_cases();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("phaselab.best_target", pl::best_target());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
