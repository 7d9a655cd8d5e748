#include "bench/support.hpp"

// MLP activations: 4096 (in L1) and 8192 x 64 (model-sized, 2 MiB per buffer).
PL_BENCHMARKS {
  for (size_t n : {size_t(4096), size_t(8192 * 64)}) {
    const std::string label = "n:" + std::to_string(n);
    pl::bench::register_variants(pl::KernelId::gelu, label,
                                 [n](benchmark::State& st, const pl::Variant& v) {
                                   auto x = pl::bench::uniform(n, -5.f, 5.f);
                                   std::vector<float> y(n);
                                   auto fn = pl::as<decltype(&pl::scalar::Gelu)>(v);
                                   for (auto _ : st) {
                                     fn(x.data(), y.data(), n);
                                     benchmark::DoNotOptimize(y.data());
                                     benchmark::ClobberMemory();
                                   }
                                   pl::bench::set_items(st, double(n));
                                 });
    pl::bench::register_variants(pl::KernelId::gelu_bwd, label,
                                 [n](benchmark::State& st, const pl::Variant& v) {
                                   auto x = pl::bench::uniform(n, -5.f, 5.f);
                                   auto dy = pl::bench::uniform(n, -1.f, 1.f, 2);
                                   std::vector<float> dx(n);
                                   auto fn = pl::as<decltype(&pl::scalar::GeluBwd)>(v);
                                   for (auto _ : st) {
                                     fn(x.data(), dy.data(), dx.data(), n);
                                     benchmark::DoNotOptimize(dx.data());
                                     benchmark::ClobberMemory();
                                   }
                                   pl::bench::set_items(st, double(n));
                                 });
  }
}
