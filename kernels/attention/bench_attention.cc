// SPDX-License-Identifier: Apache-2.0
#include "bench/support.hpp"

namespace {

// One head, n positions, d_k = d_v = d; forward or forward + backward.
void register_attention(size_t n, size_t d, bool causal) {
  const std::string label =
      "n:" + std::to_string(n) + "/d:" + std::to_string(d) + (causal ? "/causal" : "");
  // S = Q K^T, O = P V: 2 n^2 d each.
  const double fwd_flops = 4.0 * n * n * d;
  pl::bench::register_variants(pl::KernelId::attention, "fwd/" + label,
                               [=](benchmark::State& st, const pl::Variant& v) {
                                 auto q = pl::bench::uniform(n * d, -1.f, 1.f, 1),
                                      k = pl::bench::uniform(n * d, -1.f, 1.f, 2),
                                      val = pl::bench::uniform(n * d, -1.f, 1.f, 3);
                                 std::vector<float> o(n * d), p(n * n);
                                 auto fn = pl::as<decltype(&pl::scalar::Attention)>(v);
                                 for (auto _ : st) {
                                   fn(q.data(), d, k.data(), d, val.data(), d, o.data(), d,
                                      p.data(), n, d, d, 0.125f, causal, 0);
                                   benchmark::DoNotOptimize(o.data());
                                   benchmark::ClobberMemory();
                                 }
                                 pl::bench::set_flops(st, fwd_flops);
                               });
  // dV, dP, dQ, dK: four GEMMs of 2 n^2 d.
  pl::bench::register_variants(
      pl::KernelId::attention_bwd, "bwd/" + label, [=](benchmark::State& st, const pl::Variant& v) {
        auto q = pl::bench::uniform(n * d, -1.f, 1.f, 1),
             k = pl::bench::uniform(n * d, -1.f, 1.f, 2),
             val = pl::bench::uniform(n * d, -1.f, 1.f, 3),
             d_o = pl::bench::uniform(n * d, -1.f, 1.f, 4);
        std::vector<float> o(n * d), p(n * n), dq(n * d), dk(n * d), dv(n * d), scratch(n * n);
        pl::scalar::Attention(q.data(), d, k.data(), d, val.data(), d, o.data(), d, p.data(), n, d,
                              d, 0.125f, causal, 0);
        auto fn = pl::as<decltype(&pl::scalar::AttentionBwd)>(v);
        for (auto _ : st) {
          fn(q.data(), d, k.data(), d, val.data(), d, p.data(), d_o.data(), d, dq.data(), d,
             dk.data(), d, dv.data(), d, scratch.data(), n, d, d, 0.125f, causal, 0);
          benchmark::DoNotOptimize(dq.data());
          benchmark::ClobberMemory();
        }
        pl::bench::set_flops(st, 8.0 * n * n * d);
      });
}

}  // namespace

PL_BENCHMARKS {
  register_attention(128, 64, false);
  register_attention(128, 64, true);
  register_attention(256, 64, false);
}
