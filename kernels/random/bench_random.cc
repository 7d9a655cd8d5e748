// SPDX-License-Identifier: Apache-2.0
#include "bench/support.hpp"

namespace pl::bench {

// n samples per call from successive counters of one stream (bench/dev times its unregistered
// Gaussian variants with it too).
void bench_gaussian(benchmark::State& st, void (*fn)(float*, size_t, uint64_t, uint64_t, uint64_t),
                    size_t n) {
  std::vector<float> out(n);
  uint64_t counter = 0;
  for (auto _ : st) {
    fn(out.data(), n, 7, 1, counter);
    counter += n;
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_items(st, double(n));
}

}  // namespace pl::bench

PL_BENCHMARKS {
  for (size_t n : {size_t(4096), size_t(1) << 20}) {
    pl::bench::register_variants(pl::KernelId::gaussian, "n:" + std::to_string(n),
                                 [n](benchmark::State& st, const pl::Variant& v) {
                                   pl::bench::bench_gaussian(
                                       st, pl::as<decltype(&pl::scalar::Gaussian)>(v), n);
                                 });
  }
  pl::bench::register_variants(pl::KernelId::uniform_bits, "n:4096",
                               [](benchmark::State& st, const pl::Variant& v) {
                                 const size_t n = 4096;
                                 std::vector<uint32_t> out(n);
                                 auto fn = pl::as<decltype(&pl::scalar::UniformBits)>(v);
                                 uint64_t counter = 0;
                                 for (auto _ : st) {
                                   fn(out.data(), n, 7, 1, counter);
                                   counter += n;
                                   benchmark::DoNotOptimize(out.data());
                                   benchmark::ClobberMemory();
                                 }
                                 pl::bench::set_items(st, double(n));
                               });
}
