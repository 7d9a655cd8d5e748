// SPDX-License-Identifier: Apache-2.0
// peak/fma/<isa>: the single-core floating-point peak of every vector ISA this CPU runs (AVX-512,
// AVX2, SVE, NEON), measured with the loop of independent FMAs in peak.hpp. The GEMM and step
// targets are quoted as a fraction of this number.
#include <benchmark/benchmark.h>

#include "bench/peak.hpp"
#include "bench/support.hpp"

namespace {

constexpr int64_t kInner = 1000;  // FMA rounds per benchmark iteration

PL_BENCHMARKS {
  for (const std::string& isa : pl::bench::peak_isas()) {
    benchmark::RegisterBenchmark(("peak/fma/" + isa).c_str(), [isa](benchmark::State& st) {
      for (auto _ : st) benchmark::DoNotOptimize(pl::bench::fma_loop(isa, kInner));
      pl::bench::set_flops(st, double(kInner) * 12 * pl::bench::peak_lanes(isa) * 2);
    });
  }
}

}  // namespace
