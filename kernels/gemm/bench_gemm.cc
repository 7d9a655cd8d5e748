// SPDX-License-Identifier: Apache-2.0
#include "bench/support.hpp"

namespace {

using GemmFn = decltype(&pl::scalar::Gemm);

// C (m x n) = op(A) op(B), tight strides; trans = "nn", "nt" or "tn".
void register_gemm(size_t m, size_t n, size_t k, const char* trans) {
  const bool ta = trans[0] == 't', tb = trans[1] == 't';
  const std::string label = std::string(trans) + "/m:" + std::to_string(m) +
                            "/n:" + std::to_string(n) + "/k:" + std::to_string(k);
  pl::bench::register_variants(
      pl::KernelId::gemm, label, [=](benchmark::State& st, const pl::Variant& v) {
        auto a = pl::bench::uniform(m * k, -1.f, 1.f, 1);
        auto b = pl::bench::uniform(k * n, -1.f, 1.f, 2);
        std::vector<float> c(m * n);
        auto fn = pl::as<GemmFn>(v);
        for (auto _ : st) {
          fn(ta, tb, m, n, k, 1.f, a.data(), ta ? m : k, b.data(), tb ? k : n, 0.f, c.data(), n);
          benchmark::DoNotOptimize(c.data());
          benchmark::ClobberMemory();
        }
        pl::bench::set_flops(st, 2.0 * m * n * k);
      });
}

}  // namespace

PL_BENCHMARKS {
  for (const char* t : {"nn", "nt", "tn"}) {
    register_gemm(64, 64, 64, t);
    register_gemm(256, 256, 256, t);
    for (size_t k : {64, 256})
      for (size_t n : {64, 256}) register_gemm(8192, n, k, t);
  }
  // Tall-skinny model shapes: the unembedding (Y = X Wu^T, n = C = 10) and a weight gradient
  // (dW = dY^T X over all rows: k = 8192).
  register_gemm(8192, 10, 64, "nt");
  register_gemm(64, 256, 8192, "tn");
  // Batched small problems: 1000 x (16 x 16) (16 x 4), the copy task's A X^mu.
  pl::bench::register_variants(pl::KernelId::gemm_batched, "nn/batch:1000/m:16/n:4/k:16",
                               [](benchmark::State& st, const pl::Variant& v) {
                                 const size_t batch = 1000, m = 16, n = 4, k = 16;
                                 auto a = pl::bench::uniform(m * k, -1.f, 1.f, 1);
                                 auto b = pl::bench::uniform(batch * k * n, -1.f, 1.f, 2);
                                 std::vector<float> c(batch * m * n);
                                 auto fn = pl::as<decltype(&pl::scalar::GemmBatched)>(v);
                                 for (auto _ : st) {
                                   fn(0, 0, m, n, k, 1.f, a.data(), k, 0, b.data(), n, k * n, 0.f,
                                      c.data(), n, m * n, batch);
                                   benchmark::DoNotOptimize(c.data());
                                   benchmark::ClobberMemory();
                                 }
                                 pl::bench::set_flops(st, 2.0 * batch * m * n * k);
                               });
}
