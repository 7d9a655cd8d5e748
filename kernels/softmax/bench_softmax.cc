// SPDX-License-Identifier: Apache-2.0
#include "bench/support.hpp"

// Attention-shaped workloads: rows x cols with rows of 64 (short sequences) and 512.
PL_BENCHMARKS {
  struct Shape {
    size_t rows, cols;
  };
  for (Shape s : {Shape{256, 64}, Shape{64, 512}}) {
    const std::string label = std::to_string(s.rows) + "x" + std::to_string(s.cols);
    pl::bench::register_variants(pl::KernelId::softmax_rows, label,
                                 [s](benchmark::State& st, const pl::Variant& v) {
                                   const size_t n = s.rows * s.cols;
                                   auto x = pl::bench::uniform(n, -8.f, 8.f);
                                   std::vector<float> y(n);
                                   auto fn = pl::as<decltype(&pl::scalar::SoftmaxRows)>(v);
                                   for (auto _ : st) {
                                     fn(x.data(), y.data(), s.rows, s.cols, 0.125f, 0);
                                     benchmark::DoNotOptimize(y.data());
                                     benchmark::ClobberMemory();
                                   }
                                   pl::bench::set_items(st, double(n));
                                 });
    pl::bench::register_variants(pl::KernelId::softmax_rows_bwd, label,
                                 [s](benchmark::State& st, const pl::Variant& v) {
                                   const size_t n = s.rows * s.cols;
                                   auto y = pl::bench::uniform(n, 0.f, 2.f / float(s.cols));
                                   auto dy = pl::bench::uniform(n, -1.f, 1.f, 2);
                                   std::vector<float> dx(n);
                                   auto fn = pl::as<decltype(&pl::scalar::SoftmaxRowsBwd)>(v);
                                   for (auto _ : st) {
                                     fn(y.data(), dy.data(), dx.data(), s.rows, s.cols, 0.125f, 0);
                                     benchmark::DoNotOptimize(dx.data());
                                     benchmark::ClobberMemory();
                                   }
                                   pl::bench::set_items(st, double(n));
                                 });
  }
}
