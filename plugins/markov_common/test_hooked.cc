// SPDX-License-Identifier: Apache-2.0
// Hooked forward pass: hooks off equals Model::forward (bit-exact in double, rounding in float);
// patching an edge with the clean run, or a pattern with the model's own, changes nothing
// (exactly); patching every sender of a receiver equals the receiver on the corrupted run
// (exactly); replaced patterns and ablations against plain double hand computations.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "markov_common/hooked.hpp"
#include "markov_common/test_util.hpp"
#include "phaselab/kernels.hpp"

namespace {

using pl::markov::test::table;
using pl::markov::test::tokens;

using pl::markov::HookedCache;
using pl::markov::HookedModel;
using pl::markov::Hooks;
using pl::markov::Input;
using pl::markov::Model;
using pl::markov::ModelConfig;

ModelConfig tiny(int variant) {
  ModelConfig c;
  c.C = 4;
  c.N = 6;
  c.d = 8;
  c.ffn = 12;
  if (variant == 1) c.rope = true, c.tied = true;
  if (variant == 2) c.mlp = false;
  if (variant == 3) c.ln = false;
  if (variant == 4) c.heads = 2, c.layers = 3;
  return c;
}
const char* const kVariant[] = {"pre-LN learned", "rope tied", "attention-only", "no LN",
                                "2 heads 3 layers"};

// Weights large enough that every path carries signal.
template <class T>
void init(Model<T>& m, uint64_t stream) {
  const pl_kernel_table t = table();
  std::vector<float> z(m.num_params());
  t.gaussian(z.data(), z.size(), 99, stream, 0);
  m.init_from_normals(z.data());
  for (size_t i = 0; i < m.num_params(); ++i) m.params[i] += T(0.3 * z[(i * 7919) % z.size()]);
}

template <class T>
bool same(const std::vector<T>& a, const T* b) {
  return std::memcmp(a.data(), b, a.size() * sizeof(T)) == 0;
}
template <class T>
bool same(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && same(a, b.data());
}
template <class T>
double max_diff(const std::vector<T>& a, const std::vector<T>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::fmax(m, std::fabs(double(a[i]) - double(b[i])));
  return m;
}

// A tiny float model of one variant (weights from stream `init_stream`), its hooked view, kBatch
// token sequences (seed `x_seed`) and their clean run: what the patching tests start from.
struct CleanRun {
  static constexpr int kBatch = 2;
  ModelConfig c;
  Model<float> m;
  HookedModel<float> hm;
  std::vector<int32_t> x;
  HookedCache<float> clean;
  CleanRun(const pl_kernel_table& t, int variant, uint64_t init_stream, uint64_t x_seed)
      : c(tiny(variant)), m(c, &t, kBatch, 1), hm(m) {
    init(m, init_stream);
    x = tokens(kBatch, c.N, c.C, x_seed);
    hm.run(x.data(), kBatch, {}, clean);
  }
  CleanRun(const CleanRun&) = delete;  // hm refers to m
  CleanRun& operator=(const CleanRun&) = delete;
};

}  // namespace

TEST_CASE("hooked: hooks off equals Model::forward (double bit-exact, float within 2e-6)") {
  const pl_kernel_table t = table();
  const int nb = 3;
  for (int v = 0; v < 5; ++v) {
    CAPTURE(kVariant[v]);
    const ModelConfig c = tiny(v);
    const auto x = tokens(nb, c.N, c.C, 7);
    Model<double> md(c, nullptr, nb, 2);  // two chunks: rows are independent
    init(md, 1 + v);
    const double loss = md.forward(x.data(), nb);
    HookedCache<double> hd;
    HookedModel<double>(md).run(x.data(), nb, {}, hd);
    const size_t R = size_t(nb) * c.N;
    CHECK(same(hd.logits, md.U()));
    CHECK(same(hd.comp[0], md.E()));
    for (int l = 0; l < c.layers; ++l) {
      CHECK(same(hd.comp[size_t(pl::markov::comp_A(l))], md.A(l)));
      if (c.mlp) CHECK(same(hd.comp[size_t(pl::markov::comp_M(l))], md.M(l)));
      CHECK(same(hd.pattern[size_t(l)], md.attn(l)));
    }
    CHECK(hd.loss == doctest::Approx(loss).epsilon(1e-14));
    std::vector<double> lp1(R * c.C), lp2(R * c.C);
    md.log_probs(nb, lp1.data());
    hd.log_probs(c.C, lp2.data());
    CHECK(lp1 == lp2);

    // float on the kernel table: the same kernels except P v (gemm here, fused attention there)
    Model<float> mf(c, &t, nb, 1);
    init(mf, 1 + v);
    mf.forward(x.data(), nb);
    HookedCache<float> hf;
    HookedModel<float>(mf).run(x.data(), nb, {}, hf);
    CHECK(same(hf.pattern[0], mf.attn(0)));  // the first pattern is the same kernel call
    const std::vector<float> U(mf.U(), mf.U() + R * c.C);
    double worst = 0;
    for (size_t i = 0; i < U.size(); ++i)
      worst = std::fmax(worst, std::fabs(double(U[i]) - hf.logits[i]) / (1 + std::fabs(U[i])));
    CHECK(worst <= 2e-6);  // float rounding of a different summation order (~1e-7 per op)
  }
  // the shipped configs' size (N 64, d 32, C 10): the fused kernel's P v and the gemm differ
  ModelConfig c;
  c.N = 64;
  c.d = 32;
  c.ffn = 128;
  Model<float> mf(c, &t, 4, 1);
  init(mf, 9);
  const auto x = tokens(4, c.N, c.C, 8);
  mf.forward(x.data(), 4);
  HookedCache<float> hf;
  HookedModel<float>(mf).run(x.data(), 4, {}, hf);
  double worst = 0;
  for (size_t i = 0; i < hf.logits.size(); ++i)
    worst = std::fmax(
        worst, std::fabs(double(mf.U()[i]) - hf.logits[i]) / (1 + std::fabs(double(mf.U()[i]))));
  MESSAGE("hooks off vs Model<float>::forward at N 64, d 32: max |dU| / (1 + |U|) = " << worst);
  CHECK(worst <= 2e-5);
}

TEST_CASE("hooked: patching an edge with the clean run itself changes nothing, exactly") {
  const pl_kernel_table t = table();
  const int nb = CleanRun::kBatch;
  for (int v = 0; v < 5; ++v) {
    CAPTURE(kVariant[v]);
    const CleanRun f(t, v, 11 + v, 3);
    // (references, not a structured binding: CAPTURE's lambda cannot capture one in C++17)
    const auto& c = f.c;
    const auto& clean = f.clean;
    const auto& hm = f.hm;
    const auto& x = f.x;
    HookedCache<float> run;
    int edges = 0;
    for (int r = 0; r < pl::markov::num_receivers(c); ++r) {
      if (!pl::markov::has_receiver(c, r)) continue;
      for (int s = 0; s < pl::markov::senders_end(c, r); ++s) {
        if (!pl::markov::has_component(c, s)) continue;
        Hooks<float> h;
        h.edges.push_back({s, r, &clean});
        hm.run(x.data(), nb, h, run, (s + r) % 2 ? &clean : nullptr);
        CAPTURE(pl::markov::component_name(s) + " -> " + pl::markov::receiver_name(c, r));
        CHECK(same(run.logits, clean.logits));
        ++edges;
      }
    }
    CHECK(edges > 0);
  }
}

TEST_CASE("hooked: all senders of a receiver patched = the receiver on the corrupted run") {
  const pl_kernel_table t = table();
  const int nb = CleanRun::kBatch;
  for (int v = 0; v < 5; ++v) {
    CAPTURE(kVariant[v]);
    const CleanRun f(t, v, 21 + v, 3);
    // (references, not a structured binding: CAPTURE's lambda cannot capture one in C++17)
    const auto& c = f.c;
    const auto& clean = f.clean;
    const auto& hm = f.hm;
    const auto& x = f.x;
    const auto xc = tokens(nb, c.N, c.C, 4);
    HookedCache<float> bad, run;
    hm.run(xc.data(), nb, {}, bad);
    REQUIRE(max_diff(clean.logits, bad.logits) > 1e-3);  // the corruption matters
    auto patch_all = [&](Hooks<float>& h, int r) {
      for (int s = 0; s < pl::markov::senders_end(c, r); ++s)
        if (pl::markov::has_component(c, s)) h.edges.push_back({s, r, &bad});
    };
    for (int l = 0; l < c.layers; ++l) {
      Hooks<float> h;  // q, k and v of layer l all read the corrupted residual
      for (Input i : {Input::kQ, Input::kK, Input::kV}) patch_all(h, pl::markov::recv(l, i));
      hm.run(x.data(), nb, h, run, &clean);
      for (Input i : {Input::kQ, Input::kK, Input::kV})
        CHECK(same(run.resid[size_t(pl::markov::recv(l, i))],
                   bad.resid[size_t(pl::markov::recv(l, i))]));
      CHECK(same(run.pattern[size_t(l)], bad.pattern[size_t(l)]));
      CHECK(same(run.comp[size_t(pl::markov::comp_A(l))], bad.comp[size_t(pl::markov::comp_A(l))]));
      if (c.mlp) {
        Hooks<float> hm2;
        patch_all(hm2, pl::markov::recv(l, Input::kMlp));
        hm.run(x.data(), nb, hm2, run);
        CHECK(
            same(run.comp[size_t(pl::markov::comp_M(l))], bad.comp[size_t(pl::markov::comp_M(l))]));
      }
    }
    Hooks<float> hu;
    patch_all(hu, pl::markov::recv_U(c));
    hm.run(x.data(), nb, hu, run);
    CHECK(same(run.logits, bad.logits));
    // one edge alone does something (and only through its receiver)
    Hooks<float> one;
    one.edges.push_back({pl::markov::comp_E(), pl::markov::recv(c.layers - 1, Input::kK), &bad});
    hm.run(x.data(), nb, one, run, &clean);
    CHECK(max_diff(run.logits, clean.logits) > 1e-6);
    CHECK(same(run.resid[size_t(pl::markov::recv(c.layers - 1, Input::kQ))],
               clean.resid[size_t(pl::markov::recv(c.layers - 1, Input::kQ))]));
  }
}

TEST_CASE("hooked: the model's own pattern or own component as replacement changes nothing") {
  const pl_kernel_table t = table();
  const int nb = CleanRun::kBatch;
  for (int v = 0; v < 5; ++v) {
    CAPTURE(kVariant[v]);
    const CleanRun f(t, v, 31 + v, 5);
    // (references, not a structured binding: CAPTURE's lambda cannot capture one in C++17)
    const auto& c = f.c;
    const auto& clean = f.clean;
    const auto& hm = f.hm;
    const auto& x = f.x;
    HookedCache<float> run;
    for (int l = 0; l < c.layers; ++l) {
      Hooks<float> h;
      h.pattern[l] = clean.pattern[size_t(l)].data();
      hm.run(x.data(), nb, h, run);
      CHECK(same(run.logits, clean.logits));
    }
    for (int k = 0; k < pl::markov::num_components(c); ++k) {
      if (!pl::markov::has_component(c, k)) continue;
      Hooks<float> h;
      h.replace[k] = clean.comp[size_t(k)].data();
      hm.run(x.data(), nb, h, run, &clean);
      CHECK(same(run.logits, clean.logits));
    }
  }
}

// Plain double hand computation of layer l's attention output from a given pattern and the
// value receiver's residual input: A = (pattern (LN(x) Wv^T)) Wo^T.
std::vector<double> hand_attention(const Model<double>& m, int l, const std::vector<double>& x,
                                   const std::vector<double>& pat, int nb) {
  const ModelConfig& c = m.config();
  const size_t N = size_t(c.N), d = size_t(c.d), H = size_t(c.heads), dh = size_t(c.dh());
  const auto& W = m.P.l[size_t(l)];
  std::vector<double> v(nb * N * d), atty(nb * N * d, 0.0), A(nb * N * d);
  for (size_t r = 0; r < nb * N; ++r) {
    std::vector<double> ln(d);
    double mu = 0, var = 0;
    for (size_t i = 0; i < d; ++i) mu += x[r * d + i] / double(d);
    for (size_t i = 0; i < d; ++i) var += (x[r * d + i] - mu) * (x[r * d + i] - mu) / double(d);
    for (size_t i = 0; i < d; ++i)
      ln[i] = c.ln ? (x[r * d + i] - mu) / std::sqrt(var + c.ln_eps) * W.ln1g[i] + W.ln1b[i]
                   : x[r * d + i];
    for (size_t o = 0; o < d; ++o) {
      double s = 0;
      for (size_t i = 0; i < d; ++i) s += W.wqkv[(2 * d + o) * d + i] * ln[i];
      v[r * d + o] = s;
    }
  }
  for (size_t b = 0; b < size_t(nb); ++b)
    for (size_t h = 0; h < H; ++h)
      for (size_t t = 0; t < N; ++t)
        for (size_t s = 0; s < N; ++s)
          for (size_t i = 0; i < dh; ++i)
            atty[(b * N + t) * d + h * dh + i] +=
                pat[((b * H + h) * N + t) * N + s] * v[(b * N + s) * d + h * dh + i];
  for (size_t r = 0; r < nb * N; ++r)
    for (size_t o = 0; o < d; ++o) {
      double s = 0;
      for (size_t i = 0; i < d; ++i) s += W.wo[o * d + i] * atty[r * d + i];
      A[r * d + o] = s;
    }
  return A;
}

TEST_CASE("hooked: uniform and previous-token patterns, and a zeroed MLP, by hand (double)") {
  const int nb = 2;
  for (int v : {0, 3, 4}) {
    CAPTURE(kVariant[v]);
    const ModelConfig c = tiny(v);
    Model<double> m(c, nullptr, nb, 1);
    init(m, 41 + v);
    const HookedModel<double> hm(m);
    const auto x = tokens(nb, c.N, c.C, 6);
    const size_t N = size_t(c.N), H = size_t(c.heads), NN = nb * H * N * N;
    std::vector<double> uniform(NN, 0.0), prev(NN, 0.0);
    for (size_t bh = 0; bh < nb * H; ++bh)
      for (size_t t = 0; t < N; ++t) {
        for (size_t s = 0; s <= t; ++s) uniform[(bh * N + t) * N + s] = 1.0 / double(t + 1);
        prev[(bh * N + t) * N + (t ? t - 1 : 0)] = 1.0;
      }
    CHECK(pl::markov::uniform_pattern<double>(c, nb) == uniform);
    CHECK(pl::markov::previous_token_pattern<double>(c, nb) == prev);
    Hooks<double> h;
    h.pattern[0] = uniform.data();
    h.pattern[1] = prev.data();
    std::vector<double> zeros(nb * N * size_t(c.d), 0.0);
    h.replace[pl::markov::comp_M(0)] = zeros.data();
    HookedCache<double> run;
    hm.run(x.data(), nb, h, run);
    for (int l = 0; l < 2; ++l) {
      const auto A = hand_attention(m, l, run.resid[size_t(pl::markov::recv(l, Input::kV))],
                                    l == 0 ? uniform : prev, nb);
      const auto& got = run.comp[size_t(pl::markov::comp_A(l))];
      for (size_t i = 0; i < A.size(); ++i)
        REQUIRE(std::fabs(got[i] - A[i]) <= 1e-12 + 1e-10 * std::fabs(A[i]));
    }
    CHECK(run.pattern[0] == uniform);
    // with M1 zeroed, layer 2 reads E + A1 (+ 0)
    const auto& r2 = run.resid[size_t(pl::markov::recv(1, Input::kQ))];
    for (size_t i = 0; i < r2.size(); ++i)
      REQUIRE(r2[i] == run.comp[0][i] + run.comp[size_t(pl::markov::comp_A(0))][i] + 0.0);
  }
}

TEST_CASE("hooked: bad hooks are refused with a clear error") {
  const ModelConfig c = tiny(2);  // attention-only: no M1
  Model<double> m(c, nullptr, 2, 1);
  init(m, 5);
  const HookedModel<double> hm(m);
  const auto x = tokens(2, c.N, c.C, 1), y = tokens(1, c.N, c.C, 2);
  HookedCache<double> clean, other, run;
  hm.run(x.data(), 2, {}, clean);
  hm.run(y.data(), 1, {}, other);
  Hooks<double> h1;
  h1.edges.push_back({pl::markov::comp_A(1), pl::markov::recv(1, Input::kQ), &clean});
  CHECK_THROWS_WITH_AS(hm.run(x.data(), 2, h1, run), doctest::Contains("not an edge"),
                       std::invalid_argument);
  Hooks<double> h2;
  h2.replace[pl::markov::comp_M(0)] = clean.comp[0].data();
  CHECK_THROWS_AS(hm.run(x.data(), 2, h2, run), std::invalid_argument);
  Hooks<double> h3;
  h3.edges.push_back({0, pl::markov::recv_U(c), &other});
  CHECK_THROWS_WITH_AS(hm.run(x.data(), 2, h3, run), doctest::Contains("same nb"),
                       std::invalid_argument);
  CHECK_THROWS_AS(hm.run(y.data(), 1, {}, run, &clean), std::invalid_argument);
}
