// SPDX-License-Identifier: Apache-2.0
// Kept for comparison, not registered (after llm.c's dev/): gaussian.intrin.avx2/avx512, the
// hand-written Philox + Box-Muller of kernels/random/gaussian_intrin.cc compiled for x86. It
// does not beat gaussian.hwy.<isa> there (measured side by side: avx512 at parity, avx2 slower),
// so the library registers it on NEON only. Benchmarked here next to the registered variants
// ("gaussian.<variant>/n:..." from kernels/random/cases_random.cc), same sizes and stream.
#include "bench/support.hpp"

namespace pl {
namespace intrin_avx2 {
void Gaussian(float* out, size_t n, uint64_t seed, uint64_t stream, uint64_t counter);
}
namespace intrin_avx512 {
void Gaussian(float* out, size_t n, uint64_t seed, uint64_t stream, uint64_t counter);
}
}  // namespace pl

namespace {

// n samples per call of the stream (7, 1) from counter 0, as the harness case "n:<n>" does.
void bench_gaussian(benchmark::State& st, void (*fn)(float*, size_t, uint64_t, uint64_t, uint64_t),
                    size_t n) {
  std::vector<float> out(n);
  for (auto _ : st) {
    fn(out.data(), n, 7, 1, 0);
    benchmark::ClobberMemory();
  }
  pl::bench::set_items(st, double(n));
  pl::bench::set_bytes(st, 4.0 * n);
}

}  // namespace

PL_BENCHMARKS {
  // The variant's ISA must be one the CPU has, as for registered variants.
  const pl::Variant* avx2 = pl::find_variant("gaussian.hwy.avx2");
  const pl::Variant* avx512 = pl::find_variant("gaussian.hwy.avx512");
  for (size_t n : {size_t(4096), size_t(1) << 20}) {
    const std::string label = "/n:" + std::to_string(n);
    if (avx2 && avx2->supported)
      benchmark::RegisterBenchmark(
          ("dev/gaussian.intrin.avx2" + label).c_str(),
          [n](benchmark::State& st) { bench_gaussian(st, &pl::intrin_avx2::Gaussian, n); });
    if (avx512 && avx512->supported)
      benchmark::RegisterBenchmark(
          ("dev/gaussian.intrin.avx512" + label).c_str(),
          [n](benchmark::State& st) { bench_gaussian(st, &pl::intrin_avx512::Gaussian, n); });
  }
}
