// SPDX-License-Identifier: Apache-2.0
// attention: what is not a shape sweep. The sweeps against the double forward and backward and
// the finite-difference checks are harness cases in cases_attention.cc; here: large scores, and
// the softmax rows against the error bound documented for them (softmax_row-inl.h), and the two
// paths of attention.intrin against each other (bit for bit).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "tests/support.hpp"

using pl::test::runnable;
using AttFn = decltype(&pl::scalar::Attention);

TEST_CASE("attention: stable for large scores (no overflow)") {
  // scale * q.k around 100: exp would overflow without the max subtraction.
  const size_t n = 20, d = 4;
  std::vector<float> q(n * d, 10.f), k(n * d), v(n * d), o(n * d), p(n * n);
  auto u = pl::test::uniform(n * d, 2.4f, 2.6f, 11);
  for (size_t i = 0; i < n * d; ++i) k[i] = u[i], v[i] = u[i] - 2.5f;
  for (const auto* var : runnable(pl::KernelId::attention)) {
    CAPTURE(var->name);
    pl::as<AttFn> (*var)(q.data(), d, k.data(), d, v.data(), d, o.data(), d, p.data(), n, d, d, 1.f,
                         0, 0);
    bool finite = true;
    double rowsum = 0;
    for (size_t c = 0; c < n; ++c) rowsum += p[c];
    for (float x : o) finite &= std::isfinite(x);
    CHECK(finite);
    CHECK(std::fabs(rowsum - 1.0) < 1e-5);
  }
}

namespace {

using AttBwdFn = decltype(&pl::scalar::AttentionBwd);
constexpr double kU = 0x1p-24;              // float's unit roundoff
constexpr double kFltMin = 1.17549435e-38;  // below it e^t has no relative accuracy
constexpr float kScale = 0.5f;              // a power of 2: scale Q K^T stays exact

struct Scores {
  float lo, hi;
};
// Near 0, a typical spread, exponents down to -85 (the |t| term), huge but close scores.
const Scores kScores[] = {{-4.f, 4.f}, {-1e-3f, 1e-3f}, {-170.f, 10.f}, {180.f, 200.f}};

// Q = [I_m; 0] (n x m, m = min(n, 16)) makes S = scale Q K^T exact: row r < m of S is
// scale * column r of K, the other rows 0. So rows 0..m-1 of P are the kernel's softmax of
// scores chosen here, all n long (non-causal) or r + 1 long (causal).
std::vector<float> leading_identity(size_t n, size_t m) {
  std::vector<float> q(n * m, 0.f);
  for (size_t r = 0; r < m; ++r) q[r * m + r] = 1.f;
  return q;
}

const size_t kRowLengths[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 129, 256, 512};

// Calls f(variant, n, causal, scores, m) over the sweep of the two bound tests below: every
// runnable variant of `kernel`, every row length, causal or not, every score range; rows 0..m-1 are
// checked. Under emulation (tests/emulation.hpp) the rows stop at 256: n = 512 was ~70% of these
// tests' time there (n x n scores and products) and takes the same code as 256: both are whole
// multiples of every vector width, both cross the GEMMs' row blocks (96 rows), and neither
// crosses a depth block (512 or deeper for the 16-column head here, every arm variant). 256
// keeps the longest rows of the bound's sqrt(len) term there, 129 and 100 the tails.
template <class F>
void for_each_bound_case(pl::KernelId kernel, F&& f) {
  const size_t max_n = pl::test::native_or_emulated<size_t>(512, 256);
  for (const auto* var : runnable(kernel)) {
    CAPTURE(var->name);
    for (size_t n : kRowLengths)
      if (n <= max_n)
        for (int causal : {0, 1})
          for (const Scores& sc : kScores) {
            CAPTURE(n);
            CAPTURE(causal);
            CAPTURE(sc.lo);
            f(var, n, causal, sc, std::min<size_t>(n, 16));
          }
  }
}

}  // namespace

// The bound documented in kernels/softmax/softmax_row-inl.h for Accuracy::kFast, which
// attention.hwy uses (the intrinsics variants follow the same recipe, the scalar one is in double):
// |p - ref| <= FLT_MIN + (|t| + 6 + sqrt(len)) u |ref|, t = scale q.k - row max, against the
// double softmax of the same (exact) scores.
TEST_CASE("attention: softmax rows within the fast policy's documented bound") {
  for_each_bound_case(pl::KernelId::attention, [](const pl::Variant* var, size_t n, int causal,
                                                  const Scores& sc, size_t m) {
    const auto q = leading_identity(n, m);
    const auto k = pl::test::uniform(n * m, sc.lo, sc.hi, uint32_t(n * 3 + causal));
    const auto v = pl::test::uniform(n, -1.f, 1.f, 5);
    std::vector<float> o(n), p(n * n);
    pl::as<AttFn> (*var)(q.data(), m, k.data(), m, v.data(), 1, o.data(), 1, p.data(), n, m, 1,
                         kScale, causal, 0);
    std::vector<double> ref(m * n, 0.0), mag(m * n, 0.0);
    bool masked_zero = true;
    for (size_t r = 0; r < m; ++r) {
      const size_t len = causal ? r + 1 : n;
      double mx = -INFINITY, sum = 0;
      for (size_t c = 0; c < len; ++c) mx = std::max(mx, double(kScale) * k[c * m + r]);
      for (size_t c = 0; c < len; ++c) sum += std::exp(double(kScale) * k[c * m + r] - mx);
      for (size_t c = 0; c < len; ++c) {
        const double t = double(kScale) * k[c * m + r] - mx;
        ref[r * n + c] = std::exp(t) / sum;
        mag[r * n + c] = ref[r * n + c] * (std::fabs(t) + 6 + std::sqrt(double(len)));
      }
      for (size_t c = len; c < n; ++c) masked_zero &= p[r * n + c] == 0.f;
    }
    pl::test::check_output("P rows 0..m-1",
                           pl::test::out("P", p.data(), ref.data(), m * n).scaled(mag.data()),
                           kFltMin, kU);
    CHECK(masked_zero);
  });
}

// Backward: |dS - ref| <= FLT_MIN + (4 + sqrt(len)) u mag, mag = |ref| + |scale p| sum_c |p dP|
// (the terms that cancel in dP - <p, dP>). dO = [I_m; 0] and V make dP's rows 0..m-1 the columns of
// V, and Q = [I_m; 0] makes dK = dS^T Q hold dS's rows 0..m-1 exactly.
TEST_CASE("attention_bwd: softmax backward rows within the fast policy's documented bound") {
  for_each_bound_case(pl::KernelId::attention_bwd, [](const pl::Variant* var, size_t n, int causal,
                                                      const Scores& sc, size_t m) {
    const auto q = leading_identity(n, m);  // also dO
    const auto k = pl::test::uniform(n * m, -1.f, 1.f, 9);
    const auto v = pl::test::uniform(n * m, -1.f, 1.f, uint32_t(n * 5 + causal));
    // p: the double softmax of scores in [lo, hi], rounded to float; uniform rows past m.
    const auto s = pl::test::uniform(n * n, sc.lo, sc.hi, uint32_t(n * 7 + causal));
    std::vector<float> p(n * n, 0.f);
    for (size_t r = 0; r < n; ++r) {
      const size_t len = causal ? r + 1 : n;
      double mx = -INFINITY, sum = 0;
      for (size_t c = 0; c < len; ++c) mx = std::max(mx, double(kScale) * s[r * n + c]);
      for (size_t c = 0; c < len; ++c) sum += std::exp(double(kScale) * s[r * n + c] - mx);
      for (size_t c = 0; c < len; ++c)
        p[r * n + c] = float(std::exp(double(kScale) * s[r * n + c] - mx) / sum);
    }
    std::vector<float> dq(n * m), dk(n * m), dv(n * m), scratch(n * n);
    pl::as<AttBwdFn> (*var)(q.data(), m, k.data(), m, v.data(), m, p.data(), q.data(), m, dq.data(),
                            m, dk.data(), m, dv.data(), m, scratch.data(), n, m, m, kScale, causal,
                            0);
    // dS rows 0..m-1, transposed out of dK (n x m): dS[r][c] = dK[c][r].
    std::vector<float> ds(m * n);
    std::vector<double> ref(m * n, 0.0), mag(m * n, 0.0);
    for (size_t r = 0; r < m; ++r) {
      const size_t len = causal ? r + 1 : n;
      double dot = 0, dot_mag = 0;
      for (size_t c = 0; c < len; ++c) {
        dot += double(p[r * n + c]) * v[c * m + r];
        dot_mag += std::fabs(double(p[r * n + c]) * v[c * m + r]);
      }
      for (size_t c = 0; c < n; ++c) {
        ds[r * n + c] = dk[c * m + r];
        if (c >= len) continue;
        const double ps = double(kScale) * p[r * n + c];
        ref[r * n + c] = ps * (v[c * m + r] - dot);
        mag[r * n + c] =
            (std::fabs(ref[r * n + c]) + std::fabs(ps) * dot_mag) * (4 + std::sqrt(double(len)));
      }
    }
    pl::test::check_output("dS rows 0..m-1",
                           pl::test::out("dS", ds.data(), ref.data(), m * n).scaled(mag.data()),
                           kFltMin, kU);
  });
}

// attention.intrin takes its fused path for heads of whole vectors up to 128 and rows up to 16
// vectors (AVX-512; 8 elsewhere), the GEMM path otherwise; both must give the same bits. The same
// problem with one more column of zeros in Q and K (d_k + 1), or in V and dO (d_v + 1), never of
// whole vectors, takes the GEMM path, and its sums differ from the fused path's by exact zero
// terms at the end of the chains over the head (scores, dP) only. So P and O (Q, K widened), dV
// (Q, K widened) and dQ, dK (V, dO widened) must be bit-identical: each output is compared from
// the run that keeps its own width (a wider C may take other GEMM panels and depth blocks). The
// rows cross the products' depth blocks (128 deep for 64-column panels on AVX-512, 256 for 32,
// 512 for 16) and the fused path's limits on every ISA.
TEST_CASE("attention.intrin: the fused path and the GEMM path give the same bits") {
  struct Head {
    size_t dk, dv;
  };
  // Rows x cols at stride ld >= cols, zero past cols.
  const auto widen = [](const std::vector<float>& x, size_t rows, size_t cols, size_t ld) {
    std::vector<float> w(rows * ld, 0.f);
    for (size_t i = 0; i < rows; ++i) std::copy_n(&x[i * cols], cols, &w[i * ld]);
    return w;
  };
  const size_t max_n = pl::test::native_or_emulated<size_t>(256, 136);
  for (const pl::KernelId id : {pl::KernelId::attention, pl::KernelId::attention_bwd})
    for (const auto* var : runnable(id)) {
      if (std::string(var->backend) != "intrin") continue;
      CAPTURE(var->name);
      for (size_t n : {1, 17, 64, 100, 128, 136, 200, 256})
        for (Head h : {Head{64, 64}, Head{32, 16}, Head{80, 48}, Head{16, 128}})
          for (int causal : {0, 1})
            for (int linear : {0, 1}) {
              if (n > max_n) continue;
              CAPTURE(n);
              CAPTURE(h.dk);
              CAPTURE(h.dv);
              CAPTURE(causal);
              CAPTURE(linear);
              const size_t dk = h.dk, dv = h.dv, wk = dk + 1, wv = dv + 1;
              const float scale = float(1.0 / std::sqrt(double(dk)));
              const auto q = pl::test::uniform(n * dk, -1.f, 1.f, uint32_t(n + dk));
              const auto k = pl::test::uniform(n * dk, -1.f, 1.f, uint32_t(2 * n + dk));
              const auto v = pl::test::uniform(n * dv, -1.f, 1.f, uint32_t(3 * n + dv));
              const auto d_o = pl::test::uniform(n * dv, -1.f, 1.f, uint32_t(5 * n + dv));
              const auto qw = widen(q, n, dk, wk), kw = widen(k, n, dk, wk);
              size_t differ = 0;
              const auto compare = [&](const std::vector<float>& a, size_t lda,
                                       const std::vector<float>& b, size_t ldb, size_t cols) {
                for (size_t i = 0; i < n; ++i)
                  differ += std::memcmp(&a[i * lda], &b[i * ldb], cols * sizeof(float)) != 0;
              };
              if (id == pl::KernelId::attention) {
                std::vector<float> o1(n * dv), o2(n * dv), p1(n * n), p2(n * n);
                const auto f = pl::as<AttFn>(*var);
                f(q.data(), dk, k.data(), dk, v.data(), dv, o1.data(), dv, p1.data(), n, dk, dv,
                  scale, causal, linear);
                f(qw.data(), wk, kw.data(), wk, v.data(), dv, o2.data(), dv, p2.data(), n, wk, dv,
                  scale, causal, linear);
                compare(p1, n, p2, n, n);
                compare(o1, dv, o2, dv, dv);
              } else {
                // P: any values do (both paths read it), zero right of the diagonal when causal.
                auto p = pl::test::uniform(n * n, 0.f, 1.f, uint32_t(7 * n));
                if (causal)
                  for (size_t i = 0; i < n; ++i) std::fill(&p[i * n + i + 1], &p[(i + 1) * n], 0.f);
                const auto vw = widen(v, n, dv, wv), d_ow = widen(d_o, n, dv, wv);
                std::vector<float> dq(n * dk), dkk(n * dk), dvv(n * dv), scratch(n * n);
                std::vector<float> dq_k(n * wk), dk_k(n * wk), dv_k(n * dv);  // Q, K widened
                std::vector<float> dq_v(n * dk), dk_v(n * dk), dv_v(n * wv);  // V, dO widened
                const auto b = pl::as<AttBwdFn>(*var);
                b(q.data(), dk, k.data(), dk, v.data(), dv, p.data(), d_o.data(), dv, dq.data(), dk,
                  dkk.data(), dk, dvv.data(), dv, scratch.data(), n, dk, dv, scale, causal, linear);
                b(qw.data(), wk, kw.data(), wk, v.data(), dv, p.data(), d_o.data(), dv, dq_k.data(),
                  wk, dk_k.data(), wk, dv_k.data(), dv, scratch.data(), n, wk, dv, scale, causal,
                  linear);
                b(q.data(), dk, k.data(), dk, vw.data(), wv, p.data(), d_ow.data(), wv, dq_v.data(),
                  dk, dk_v.data(), dk, dv_v.data(), wv, scratch.data(), n, dk, wv, scale, causal,
                  linear);
                compare(dvv, dv, dv_k, dv, dv);
                compare(dq, dk, dq_v, dk, dk);
                compare(dkk, dk, dk_v, dk, dk);
              }
              CHECK(differ == 0);
            }
    }
}
