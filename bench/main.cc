// SPDX-License-Identifier: Apache-2.0
// phaselab_bench: Google Benchmark over every kernel x runnable variant x size family.
// The kernels' benchmarks come from their harness cases (kernels/<family>/cases_*.cc); the
// FMA peak (bench_peak.cc) and the variants kept for comparison (bench/dev) register their own.
// `--compared-shapes` / `--model-shapes` print the GEMM shapes bench/compare.py sets beside
// OpenBLAS and PyTorch (kernels/gemm/model_shapes.hpp), one "m n k tr" a line, and exit;
// `--dispatch TARGET` prints the variant dispatch selects for each kernel under TARGET ("best" or
// an ISA name), one "kernel variant" a line.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "kernels/gemm/model_shapes.hpp"
#include "phaselab/kernels.hpp"

namespace pl::bench {
void register_harness_cases();  // harness_bench.cc
}

int main(int argc, char** argv) {
  const auto print = [](size_t m, size_t n, size_t k, const char* t) {
    std::printf("%zu %zu %zu %s\n", m, n, k, t);
  };
  if (argc == 2 && std::strcmp(argv[1], "--compared-shapes") == 0) {
    pl::gemm_shapes::for_each_compared_gemm(print);
    return 0;
  }
  if (argc == 2 && std::strcmp(argv[1], "--model-shapes") == 0) {
    pl::gemm_shapes::for_each_model_gemm(print);
    return 0;
  }
  if (argc == 3 && std::strcmp(argv[1], "--dispatch") == 0) {
    const std::string target = std::strcmp(argv[2], "best") == 0 ? "" : argv[2];
    if (!target.empty() && !pl::target_known(target)) {
      std::fprintf(stderr, "unknown target %s\n", argv[2]);
      return 1;
    }
    for (int k = 0; k < pl::kNumKernels; ++k)
      if (const pl::Variant* v = pl::selected_variant(k, target))
        std::printf("%s %s\n", pl::kernel_name(k), v->name.c_str());
    return 0;
  }
  pl::bench::register_harness_cases();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("phaselab.best_target", pl::best_target());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
