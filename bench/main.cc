// phaselab_bench: Google Benchmark over every kernel x runnable variant x size family.
// Benchmarks are registered by the kernels/<family>/bench_*.cc files at start-up.
#include <benchmark/benchmark.h>

#include <cstdio>

#include "phaselab/kernels.hpp"

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("phaselab.best_target", pl::best_target());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
