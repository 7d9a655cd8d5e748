#include "bench/support.hpp"

PL_BENCHMARKS {
  for (size_t n : {size_t(64), size_t(4096)}) {
    pl::bench::register_variants(pl::KernelId::exp, "n:" + std::to_string(n),
                                 [n](benchmark::State& st, const pl::Variant& v) {
                                   auto x = pl::bench::uniform(n, -10.f, 10.f);
                                   std::vector<float> y(n);
                                   auto fn = pl::as<decltype(&pl::scalar::Exp)>(v);
                                   for (auto _ : st) {
                                     fn(x.data(), y.data(), n);
                                     benchmark::DoNotOptimize(y.data());
                                     benchmark::ClobberMemory();
                                   }
                                   pl::bench::set_items(st, double(n));
                                 });
  }
}
