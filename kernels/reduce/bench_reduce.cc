// SPDX-License-Identifier: Apache-2.0
#include "bench/support.hpp"

PL_BENCHMARKS {
  const size_t n = 4096;
  pl::bench::register_variants(pl::KernelId::sum, "n:4096",
                               [n](benchmark::State& st, const pl::Variant& v) {
                                 auto x = pl::bench::uniform(n, -1.f, 1.f, 1);
                                 auto fn = pl::as<decltype(&pl::scalar::Sum)>(v);
                                 for (auto _ : st) benchmark::DoNotOptimize(fn(x.data(), n));
                                 pl::bench::set_items(st, double(n));
                               });
  pl::bench::register_variants(pl::KernelId::dot, "n:4096",
                               [n](benchmark::State& st, const pl::Variant& v) {
                                 auto x = pl::bench::uniform(n, -1.f, 1.f, 1);
                                 auto y = pl::bench::uniform(n, -1.f, 1.f, 2);
                                 auto fn = pl::as<decltype(&pl::scalar::Dot)>(v);
                                 for (auto _ : st)
                                   benchmark::DoNotOptimize(fn(x.data(), y.data(), n));
                                 pl::bench::set_items(st, double(n));
                               });
  pl::bench::register_variants(pl::KernelId::max, "n:4096",
                               [n](benchmark::State& st, const pl::Variant& v) {
                                 auto x = pl::bench::uniform(n, -1.f, 1.f, 1);
                                 auto fn = pl::as<decltype(&pl::scalar::Max)>(v);
                                 for (auto _ : st) benchmark::DoNotOptimize(fn(x.data(), n));
                                 pl::bench::set_items(st, double(n));
                               });
}
