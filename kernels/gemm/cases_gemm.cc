// SPDX-License-Identifier: Apache-2.0
// gemm, gemm_batched: harness cases (kernels/harness/harness.hpp) against op(A) op(B) in double
// written here (independent of gemm.scalar), |err| <= (1e-5 + 1e-5 |ref|) sqrt(k). gemm: every
// transpose, shapes around the vector widths and across the depth, column and row blocks, padded
// strides (the padding of C must be kept), beta == 0 with NaN in C (C is not read) and an
// accumulating alpha/beta. gemm_batched: every batch entry at its strides, all transposes.
// Benchmarks: 64^3, 256^3, 8192 rows x {64, 256} x {64, 256} for nn/nt/tn, the model's
// tall-skinny unembedding and weight gradient, the Markov model's products at d_model 32 and 64
// (1024-row chunks), and the copy task's 1000 x (16 x 16)(16 x 4).
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/gemm/cases_gemm_common.hpp"
#include "kernels/gemm/model_shapes.hpp"
#include "kernels/harness/harness.hpp"

namespace {

using pl::test::out;
using pl::test::Output;
using pl::test::gemm_cases::kPad;
using pl::test::gemm_cases::tol_for;

// A stored matrix of logical shape rows x cols (op applied) with row stride ld; stored as
// cols x rows when transposed.
struct Mat {
  std::vector<float> v;
  size_t ld = 0;
  bool t = false;
  Mat() = default;
  Mat(size_t rows, size_t cols, bool trans, size_t pad, uint32_t seed)
      : ld((trans ? rows : cols) + pad), t(trans) {
    v = pl::test::uniform((trans ? cols : rows) * ld, -1.f, 1.f, seed);
  }
  double at(size_t r, size_t c) const { return t ? v[c * ld + r] : v[r * ld + c]; }
};

struct Gemm {
  size_t m, n, k, ldc;
  float alpha, beta;
  Mat a, b;
  std::vector<float> c, got;
  std::vector<double> ref;
  bool pad_ok = true;
};

struct Shape {
  size_t m, n, k;
  bool ta, tb;
  size_t apad, bpad, cpad;
  uint32_t seed;
};

void add_gemm(const std::string& label, Shape s, float alpha, float beta, pl::test::Use use) {
  const double tol = tol_for(s.k);
  pl::test::add_case<Gemm>(
      {pl::KernelId::gemm,
       label,
       tol,
       tol,
       {double(s.m) * s.n * s.k, 2.0 * s.m * s.n * s.k, 4.0 * (s.m * s.k + s.k * s.n + s.m * s.n)},
       use},
      [=](bool reference) {
        Gemm g{s.m,
               s.n,
               s.k,
               s.n + s.cpad,
               alpha,
               beta,
               Mat(s.m, s.k, s.ta, s.apad, s.seed),
               Mat(s.k, s.n, s.tb, s.bpad, s.seed + 1),
               {},
               std::vector<float>(s.m * s.n),
               {}};
        const auto c0 = pl::test::uniform(s.m * g.ldc, -1.f, 1.f, 99);
        g.c.resize(s.m * g.ldc);
        for (size_t i = 0; i < s.m; ++i)
          for (size_t j = 0; j < g.ldc; ++j)
            g.c[i * g.ldc + j] = j >= s.n      ? kPad
                                 : beta == 0.f ? std::numeric_limits<float>::quiet_NaN()
                                               : c0[i * g.ldc + j];
        if (reference) {  // alpha op(A) op(B) + beta C in double
          g.ref.assign(s.m * s.n, 0.0);
          for (size_t i = 0; i < s.m; ++i)
            for (size_t p = 0; p < s.k; ++p) {
              const double aip = g.a.at(i, p);
              for (size_t j = 0; j < s.n; ++j) g.ref[i * s.n + j] += aip * g.b.at(p, j);
            }
          for (size_t i = 0; i < s.m; ++i)
            for (size_t j = 0; j < s.n; ++j) {
              double& r = g.ref[i * s.n + j];
              r = alpha * r + (beta == 0.f ? 0.0 : beta * double(g.c[i * g.ldc + j]));
            }
        }
        return g;
      },
      [](Gemm& g, const pl::Variant& v) {
        pl::as<decltype(&pl::scalar::Gemm)>(v)(g.a.t, g.b.t, g.m, g.n, g.k, g.alpha, g.a.v.data(),
                                               g.a.ld, g.b.v.data(), g.b.ld, g.beta, g.c.data(),
                                               g.ldc);
      },
      [](Gemm& g) {
        g.pad_ok = true;
        for (size_t i = 0; i < g.m; ++i) {
          for (size_t j = 0; j < g.n; ++j) g.got[i * g.n + j] = g.c[i * g.ldc + j];
          for (size_t j = g.n; j < g.ldc; ++j) g.pad_ok &= g.c[i * g.ldc + j] == kPad;
        }
        return std::vector<Output>{out("C", g.got.data(), g.ref.data(), g.m * g.n),
                                   pl::test::holds("padding of C kept", g.pad_ok)};
      });
}

// Every transpose of one shape, for beta == 0 (NaN in C) and an accumulating alpha/beta.
void add_gemm_shape(size_t m, size_t n, size_t k, size_t pad, uint32_t seed) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (auto [alpha, beta] : {std::pair<float, float>{1.f, 0.f}, {-1.5f, 0.75f}})
        add_gemm(std::string(ta ? "t" : "n") + (tb ? "t" : "n") + "/m:" + std::to_string(m) +
                     "/n:" + std::to_string(n) + "/k:" + std::to_string(k) +
                     "/pad:" + std::to_string(pad) + "/alpha:" + pl::test::num(alpha) +
                     "/beta:" + pl::test::num(beta),
                 {m, n, k, bool(ta), bool(tb), pad, pad + 1, pad == 0 ? 0 : pad + 2, seed}, alpha,
                 beta, pl::test::Use::test);
}

struct Batched {
  size_t m, n, k, batch, lda, ldb, ldc, sa, sb, sc;
  int ta, tb;
  float alpha, beta;
  std::vector<float> a, b, c0, c, got;
  std::vector<double> ref;
  bool rest_ok = true;
};

void add_batched(const std::string& label, size_t m, size_t n, size_t k, size_t batch, int ta,
                 int tb, float alpha, float beta, bool padded, bool shared_a, pl::test::Use use) {
  const double tol = tol_for(k);
  pl::test::add_case<Batched>(
      {pl::KernelId::gemm_batched,
       label,
       tol,
       tol,
       {double(batch) * m * n * k, 2.0 * batch * m * n * k,
        4.0 * batch * ((shared_a ? 0 : m * k) + k * n + m * n)},
       use},
      [=](bool reference) {
        Batched q{};
        q.m = m, q.n = n, q.k = k, q.batch = batch, q.ta = ta, q.tb = tb;
        q.alpha = alpha, q.beta = beta;
        q.lda = (ta ? m : k) + (padded ? 2 : 0);
        q.ldb = (tb ? k : n) + (padded ? 1 : 0);
        q.ldc = n + (padded ? 3 : 0);
        q.sa = shared_a ? 0 : (ta ? k : m) * q.lda + (padded ? 7 : 0);
        q.sb = (tb ? n : k) * q.ldb + (padded ? 1 : 0);
        q.sc = m * q.ldc + (padded ? 5 : 0);
        q.a = pl::test::uniform(shared_a ? (ta ? k : m) * q.lda : batch * q.sa, -1.f, 1.f, 3);
        q.b = pl::test::uniform(batch * q.sb, -1.f, 1.f, 4);
        // beta == 0: C is not read (NaN there must not leak into the result)
        q.c0 = pl::test::uniform(batch * q.sc, -1.f, 1.f, 5);
        if (beta == 0.f)
          for (size_t e = 0; e < batch; ++e)
            for (size_t i = 0; i < m; ++i)
              for (size_t j = 0; j < n; ++j)
                q.c0[e * q.sc + i * q.ldc + j] = std::numeric_limits<float>::quiet_NaN();
        q.c = q.c0;
        q.got.resize(batch * m * n);
        if (reference) {
          q.ref.resize(batch * m * n);
          for (size_t e = 0; e < batch; ++e)
            for (size_t i = 0; i < m; ++i)
              for (size_t j = 0; j < n; ++j) {
                double acc = 0;
                for (size_t p = 0; p < k; ++p)
                  acc +=
                      double(ta ? q.a[e * q.sa + p * q.lda + i] : q.a[e * q.sa + i * q.lda + p]) *
                      double(tb ? q.b[e * q.sb + j * q.ldb + p] : q.b[e * q.sb + p * q.ldb + j]);
                q.ref[(e * m + i) * n + j] =
                    alpha * acc +
                    (beta == 0.f ? 0.0 : beta * double(q.c0[e * q.sc + i * q.ldc + j]));
              }
        }
        return q;
      },
      [](Batched& q, const pl::Variant& v) {
        pl::as<decltype(&pl::scalar::GemmBatched)>(v)(
            q.ta, q.tb, q.m, q.n, q.k, q.alpha, q.a.data(), q.lda, q.sa, q.b.data(), q.ldb, q.sb,
            q.beta, q.c.data(), q.ldc, q.sc, q.batch);
      },
      [](Batched& q) {
        q.rest_ok = true;  // everything of C outside the m x n blocks is kept
        for (size_t i = 0; i < q.c.size(); ++i) {
          const size_t e = i / q.sc, in = i % q.sc, r = in / q.ldc, col = in % q.ldc;
          if (e < q.batch && r < q.m && col < q.n)
            q.got[(e * q.m + r) * q.n + col] = q.c[i];
          else
            q.rest_ok &= std::memcmp(&q.c[i], &q.c0[i], sizeof(float)) == 0;
        }
        return std::vector<Output>{out("C", q.got.data(), q.ref.data(), q.got.size()),
                                   pl::test::holds("C outside the blocks kept", q.rest_ok)};
      });
}

}  // namespace

PL_KERNEL_CASES {
  using pl::test::Use;
  // Shapes around the vector widths; padded strides on two seeds in three.
  const size_t mn[] = {1, 3, 7, 8, 9, 15, 16, 17, 33, 64, 65, 100};
  const size_t ks[] = {1, 8, 17, 64};
  uint32_t seed = 1;
  for (size_t m : mn)
    for (size_t n : mn)
      for (size_t k : ks) {
        add_gemm_shape(m, n, k, (seed % 3) * 3, seed);
        ++seed;
      }
  // k > 128 crosses the depth block of the 512-bit kernel, n = 600 several column blocks,
  // m = 200 several row blocks; 257 and 128 sit around the widths. 7 x 4 x 2100 and 7 x 8 x 1100
  // cross the depth blocks of the narrow panels (one or two vectors: 512 to 2048 deep by ISA)
  // within the emulated runs' work cap (2^18 FLOPs, scripts/test-aarch64.sh).
  struct S {
    size_t m, n, k;
  };
  seed = 500;
  for (S s : {S{128, 257, 257}, S{257, 128, 65}, S{65, 64, 257}, S{200, 256, 256}, S{200, 64, 256},
              S{7, 600, 300}, S{33, 1, 513}, S{1, 129, 1000}, S{7, 4, 2100}, S{7, 8, 1100}}) {
    add_gemm_shape(s.m, s.n, s.k, seed % 2 ? 5 : 0, seed);
    ++seed;
  }
  // gemm_batched: n = 4 and n = 8 with k <= 256 take the narrow path of gemm_batched.hwy, k = 300
  // the general one.
  for (S s : {S{1, 1, 1}, S{5, 9, 17}, S{16, 16, 16}, S{33, 7, 65}, S{17, 100, 4}, S{16, 4, 16},
              S{11, 8, 9}, S{9, 3, 300}})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (float beta : {-2.f, 0.f})
          add_batched(std::string(ta ? "t" : "n") + (tb ? "t" : "n") +
                          "/batch:3/m:" + std::to_string(s.m) + "/n:" + std::to_string(s.n) +
                          "/k:" + std::to_string(s.k) + "/beta:" + pl::test::num(beta),
                      s.m, s.n, s.k, 3, ta, tb, 0.5f, beta, true, false, Use::test);
  // The benchmark shapes: tight strides, C = op(A) op(B). Those with more than 2^25
  // multiply-adds are bench only (the double reference would dominate the suite).
  auto bench = [](size_t m, size_t n, size_t k, const char* t) {
    const Use use = double(m) * n * k <= 0x1p25 ? Use::test_and_bench : Use::bench;
    add_gemm(std::string(t) + "/m:" + std::to_string(m) + "/n:" + std::to_string(n) +
                 "/k:" + std::to_string(k),
             {m, n, k, t[0] == 't', t[1] == 't', 0, 0, 0, 1}, 1.f, 0.f, use);
  };
  for (const char* t : {"nn", "nt", "tn"}) {
    bench(64, 64, 64, t);
    bench(256, 256, 256, t);
    for (size_t k : {64, 256})
      for (size_t n : {64, 256}) bench(8192, n, k, t);
  }
  // Tall-skinny model shapes: the unembedding (Y = X Wu^T, n = C = 10) and a weight gradient
  // (dW = dY^T X over all rows: k = 8192).
  bench(8192, 10, 64, "nt");
  bench(64, 256, 8192, "tn");
  // The Markov model's own products (model_shapes.hpp).
  pl::gemm_shapes::for_each_model_gemm(
      [&](size_t m, size_t n, size_t k, const char* t) { bench(m, n, k, t); });
  // Batched small problems, one A for all: the copy task's A X^mu, 1000 x (16 x 16) (16 x 4).
  add_batched("nn/batch:1000/m:16/n:4/k:16", 16, 4, 16, 1000, 0, 0, 1.f, 0.f, false, true,
              Use::test_and_bench);
}
