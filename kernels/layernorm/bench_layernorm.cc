// SPDX-License-Identifier: Apache-2.0
#include "bench/support.hpp"

// Residual-stream shapes: 8192 tokens x 64 features and 1024 x 256. Items are elements.
PL_BENCHMARKS {
  struct Shape {
    size_t rows, d;
  };
  for (Shape s : {Shape{8192, 64}, Shape{1024, 256}}) {
    const std::string label = std::to_string(s.rows) + "x" + std::to_string(s.d);
    pl::bench::register_variants(pl::KernelId::layernorm, label,
                                 [s](benchmark::State& st, const pl::Variant& v) {
                                   const size_t n = s.rows * s.d;
                                   auto x = pl::bench::uniform(n, -2.f, 2.f);
                                   auto gamma = pl::bench::uniform(s.d, 0.5f, 1.5f, 2);
                                   auto beta = pl::bench::uniform(s.d, -1.f, 1.f, 3);
                                   std::vector<float> y(n), mean(s.rows), rstd(s.rows);
                                   auto fn = pl::as<decltype(&pl::scalar::Layernorm)>(v);
                                   for (auto _ : st) {
                                     fn(x.data(), gamma.data(), beta.data(), y.data(), mean.data(),
                                        rstd.data(), s.rows, s.d, 1e-5f);
                                     benchmark::DoNotOptimize(y.data());
                                     benchmark::ClobberMemory();
                                   }
                                   pl::bench::set_items(st, double(n));
                                 });
    pl::bench::register_variants(pl::KernelId::layernorm_bwd, label,
                                 [s](benchmark::State& st, const pl::Variant& v) {
                                   const size_t n = s.rows * s.d;
                                   auto x = pl::bench::uniform(n, -2.f, 2.f);
                                   auto dy = pl::bench::uniform(n, -1.f, 1.f, 4);
                                   auto gamma = pl::bench::uniform(s.d, 0.5f, 1.5f, 2);
                                   std::vector<float> mean(s.rows, 0.f), rstd(s.rows, 0.9f);
                                   std::vector<float> dx(n, 0.f), dgamma(s.d, 0.f), dbeta(s.d, 0.f);
                                   auto fn = pl::as<decltype(&pl::scalar::LayernormBwd)>(v);
                                   for (auto _ : st) {
                                     fn(dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(),
                                        dx.data(), dgamma.data(), dbeta.data(), s.rows, s.d);
                                     benchmark::DoNotOptimize(dx.data());
                                     benchmark::ClobberMemory();
                                   }
                                   pl::bench::set_items(st, double(n));
                                 });
  }
}
