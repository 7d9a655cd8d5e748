// SPDX-License-Identifier: Apache-2.0
#include "bench/support.hpp"

PL_BENCHMARKS {
  for (pl::KernelId k : {pl::KernelId::adam, pl::KernelId::adamw}) {
    for (size_t n : {size_t(4096), size_t(1) << 20}) {
      pl::bench::register_variants(k, "n:" + std::to_string(n),
                                   [n](benchmark::State& st, const pl::Variant& v) {
                                     auto p = pl::bench::uniform(n, -1.f, 1.f, 1);
                                     auto g = pl::bench::uniform(n, -1.f, 1.f, 2);
                                     std::vector<float> m(n, 0.f), vv(n, 0.f);
                                     auto fn = pl::as<decltype(&pl::scalar::Adam)>(v);
                                     int64_t step = 1;
                                     for (auto _ : st) {
                                       fn(p.data(), g.data(), m.data(), vv.data(), n, 1e-3f, 0.9f,
                                          0.999f, 1e-8f, 0.01f, step++);
                                       benchmark::ClobberMemory();
                                     }
                                     pl::bench::set_items(st, double(n));
                                   });
    }
  }
  pl::bench::register_variants(pl::KernelId::sgld, "n:4096",
                               [](benchmark::State& st, const pl::Variant& v) {
                                 const size_t n = 4096;
                                 auto theta = pl::bench::uniform(n, -1.f, 1.f, 1);
                                 auto g = pl::bench::uniform(n, -1.f, 1.f, 2);
                                 auto fn = pl::as<decltype(&pl::scalar::Sgld)>(v);
                                 uint64_t counter = 0;
                                 for (auto _ : st) {
                                   fn(theta.data(), g.data(), n, 1e-4f, 1e-3f, 1, 2, counter);
                                   counter += n;
                                   benchmark::ClobberMemory();
                                 }
                                 pl::bench::set_items(st, double(n));
                               });
}
