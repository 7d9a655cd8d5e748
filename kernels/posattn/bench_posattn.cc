// SPDX-License-Identifier: Apache-2.0
#include "bench/support.hpp"

namespace {

// Copy task, a batch of p sequences: forward h = A X, f = h W^T; backward dw, dh, da.
void register_posattn(size_t p, size_t l, size_t v) {
  const std::string label =
      "p:" + std::to_string(p) + "/L:" + std::to_string(l) + "/V:" + std::to_string(v);
  const double fwd_flops = 2.0 * p * l * v * (l + v);      // A X, then h W^T
  const double bwd_flops = 2.0 * p * l * v * (2 * v + l);  // dW, dh, dA
  pl::bench::register_variants(pl::KernelId::posattn, "fwd/" + label,
                               [=](benchmark::State& st, const pl::Variant& var) {
                                 auto a = pl::bench::uniform(l * l, -1.f, 1.f, 1),
                                      x = pl::bench::uniform(p * l * v, 0.f, 1.f, 2),
                                      w = pl::bench::uniform(v * v, -1.f, 1.f, 3);
                                 std::vector<float> h(p * l * v), f(p * l * v);
                                 auto fn = pl::as<decltype(&pl::scalar::Posattn)>(var);
                                 for (auto _ : st) {
                                   fn(a.data(), x.data(), w.data(), h.data(), f.data(), p, l, v);
                                   benchmark::DoNotOptimize(f.data());
                                   benchmark::ClobberMemory();
                                 }
                                 pl::bench::set_flops(st, fwd_flops);
                               });
  pl::bench::register_variants(pl::KernelId::posattn_bwd, "bwd/" + label,
                               [=](benchmark::State& st, const pl::Variant& var) {
                                 auto a = pl::bench::uniform(l * l, -1.f, 1.f, 1),
                                      x = pl::bench::uniform(p * l * v, 0.f, 1.f, 2),
                                      w = pl::bench::uniform(v * v, -1.f, 1.f, 3),
                                      h = pl::bench::uniform(p * l * v, -1.f, 1.f, 4),
                                      df = pl::bench::uniform(p * l * v, -1.f, 1.f, 5);
                                 std::vector<float> da(l * l), dw(v * v), dh(p * l * v);
                                 auto fn = pl::as<decltype(&pl::scalar::PosattnBwd)>(var);
                                 for (auto _ : st) {
                                   fn(a.data(), x.data(), w.data(), h.data(), df.data(), da.data(),
                                      dw.data(), dh.data(), p, l, v);
                                   benchmark::DoNotOptimize(da.data());
                                   benchmark::ClobberMemory();
                                 }
                                 pl::bench::set_flops(st, bwd_flops);
                               });
}

// Uniform random tokens (p x L, values < V) and the copy task's targets y_i = x_{i-1 mod L}.
void copy_tokens(size_t p, size_t l, size_t v, std::vector<int32_t>& xt, std::vector<int32_t>& yt) {
  const auto u = pl::bench::uniform(p * l, 0.f, 1.f, 2);
  xt.resize(p * l);
  yt.resize(p * l);
  for (size_t i = 0; i < p * l; ++i) xt[i] = std::min(int32_t(u[i] * float(v)), int32_t(v) - 1);
  for (size_t mu = 0; mu < p; ++mu)
    for (size_t i = 0; i < l; ++i) yt[mu * l + i] = xt[mu * l + (i + l - 1) % l];
}

// One-hot tokens, fused squared loss (sse only, and sse + gradients).
void register_onehot(size_t p, size_t l, size_t v) {
  const std::string label =
      "p:" + std::to_string(p) + "/L:" + std::to_string(l) + "/V:" + std::to_string(v);
  for (const bool grad : {false, true})
    pl::bench::register_variants(
        pl::KernelId::posattn_onehot_sse, std::string(grad ? "sse_grad/" : "sse/") + label,
        [=](benchmark::State& st, const pl::Variant& var) {
          auto a = pl::bench::uniform(l * l, -1.f, 1.f, 1),
               w = pl::bench::uniform(v * v, -1.f, 1.f, 3);
          std::vector<int32_t> xt, yt;
          copy_tokens(p, l, v, xt, yt);
          std::vector<float> da(l * l), dw(v * v);
          auto fn = pl::as<decltype(&pl::scalar::PosattnOnehotSse)>(var);
          for (auto _ : st) {
            double s = fn(a.data(), w.data(), xt.data(), yt.data(), grad ? da.data() : nullptr,
                          grad ? dw.data() : nullptr, p, l, v);
            benchmark::DoNotOptimize(s);
            benchmark::ClobberMemory();
          }
          pl::bench::set_items(st, double(p));
        });
}

// The same sse from token counts (full batch; the cost does not depend on p).
void register_gram(size_t p, size_t l, size_t v) {
  const std::string label =
      "p:" + std::to_string(p) + "/L:" + std::to_string(l) + "/V:" + std::to_string(v);
  for (const bool grad : {false, true})
    pl::bench::register_variants(
        pl::KernelId::posattn_gram_sse, std::string(grad ? "gram_grad/" : "gram/") + label,
        [=](benchmark::State& st, const pl::Variant& var) {
          auto a = pl::bench::uniform(l * l, -1.f, 1.f, 1),
               w = pl::bench::uniform(v * v, -1.f, 1.f, 3);
          std::vector<int32_t> xt, yt;
          copy_tokens(p, l, v, xt, yt);
          std::vector<double> c(l * l * v * v, 0.0), d(c.size(), 0.0);
          pl::scalar::PosattnOnehotStats(xt.data(), yt.data(), c.data(), d.data(), p, l, v);
          std::vector<float> da(l * l), dw(v * v);
          auto fn = pl::as<decltype(&pl::scalar::PosattnGramSse)>(var);
          for (auto _ : st) {
            double s = fn(a.data(), w.data(), c.data(), d.data(), grad ? da.data() : nullptr,
                          grad ? dw.data() : nullptr, l, v);
            benchmark::DoNotOptimize(s);
            benchmark::ClobberMemory();
          }
          pl::bench::set_items(st, double(p));
        });
}

}  // namespace

PL_BENCHMARKS {
  register_posattn(1000, 16, 4);  // the copy-task benchmark
  register_posattn(100, 64, 64);
  register_posattn(16, 256, 256);
  register_onehot(1000, 16, 4);  // the copy-task Adam step
  register_onehot(100, 64, 64);
  register_gram(1000, 16, 4);  // the same step through the counts
  register_gram(1000, 32, 8);
}
