// SPDX-License-Identifier: Apache-2.0
// gemm, gemm_batched: every runnable variant against a double-precision oracle written here
// (independent of gemm.scalar), |err| <= (1e-5 + 1e-5 |ref|) * sqrt(k).
#include <cmath>
#include <limits>

#include "tests/support.hpp"

using pl::test::runnable;

namespace {

using GemmFn = decltype(&pl::scalar::Gemm);
using GemmBatchedFn = decltype(&pl::scalar::GemmBatched);

// A stored matrix of logical shape rows x cols (op applied) with row stride ld; stored as
// cols x rows when transposed.
struct Mat {
  std::vector<float> v;
  size_t ld;
  bool t;
  Mat(size_t rows, size_t cols, bool trans, size_t pad, uint32_t seed)
      : ld((trans ? rows : cols) + pad), t(trans) {
    v = pl::test::uniform((trans ? cols : rows) * ld, -1.f, 1.f, seed);
  }
  double at(size_t r, size_t c) const { return t ? v[c * ld + r] : v[r * ld + c]; }
};

// op(A) op(B) in double: m x n
std::vector<double> product(const Mat& a, const Mat& b, size_t m, size_t n, size_t k) {
  std::vector<double> s(m * n, 0.0);
  for (size_t i = 0; i < m; ++i)
    for (size_t p = 0; p < k; ++p) {
      const double aip = a.at(i, p);
      for (size_t j = 0; j < n; ++j) s[i * n + j] += aip * b.at(p, j);
    }
  return s;
}

// Runs fn on one problem for two (alpha, beta) cases: beta == 0 with NaN in C, and an
// accumulating one; checks every element of C and that the padding between rows is untouched.
void check_one(GemmFn fn, const Mat& a, const Mat& b, const std::vector<double>& ab, size_t m,
               size_t n, size_t k, size_t cpad) {
  const size_t ldc = n + cpad;
  const float sentinel = -7.25f;
  const double tol = 1e-5 * std::sqrt(double(std::max<size_t>(k, 1)));
  struct Case {
    float alpha, beta;
  };
  for (Case cs : {Case{1.f, 0.f}, Case{-1.5f, 0.75f}}) {
    CAPTURE(cs.alpha);
    CAPTURE(cs.beta);
    auto c0 = pl::test::uniform(m * ldc, -1.f, 1.f, 99);
    std::vector<float> c(m * ldc);
    std::vector<double> ref(m * n);
    std::vector<float> got(m * n);
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < ldc; ++j) {
        const bool inside = j < n;
        c[i * ldc + j] = !inside          ? sentinel
                         : cs.beta == 0.f ? std::numeric_limits<float>::quiet_NaN()
                                          : c0[i * ldc + j];
        if (inside)
          ref[i * n + j] =
              cs.alpha * ab[i * n + j] + (cs.beta == 0.f ? 0.0 : cs.beta * double(c[i * ldc + j]));
      }
    fn(a.t, b.t, m, n, k, cs.alpha, a.v.data(), a.ld, b.v.data(), b.ld, cs.beta, c.data(), ldc);
    bool pad_ok = true;
    for (size_t i = 0; i < m; ++i) {
      for (size_t j = 0; j < n; ++j) got[i * n + j] = c[i * ldc + j];
      for (size_t j = n; j < ldc; ++j) pad_ok &= c[i * ldc + j] == sentinel;
    }
    pl::test::check_close("C", got.data(), ref.data(), m * n, tol, tol);
    CHECK(pad_ok);
  }
}

void check_shape(size_t m, size_t n, size_t k, size_t pad, uint32_t seed) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      CAPTURE(m);
      CAPTURE(n);
      CAPTURE(k);
      CAPTURE(ta);
      CAPTURE(tb);
      CAPTURE(pad);
      const Mat a(m, k, ta, pad, seed), b(k, n, tb, pad + 1, seed + 1);
      const auto ab = product(a, b, m, n, k);
      for (const auto* v : runnable(pl::KernelId::gemm)) {
        CAPTURE(v->name);
        check_one(pl::as<GemmFn>(*v), a, b, ab, m, n, k, pad == 0 ? 0 : pad + 2);
      }
    }
}

}  // namespace

TEST_CASE("gemm: all transposes, shapes around the vector widths, alpha/beta, padded strides") {
  const size_t mn[] = {1, 3, 7, 8, 9, 15, 16, 17, 33, 64, 65, 100};
  const size_t ks[] = {1, 8, 17, 64};
  uint32_t seed = 1;
  for (size_t m : mn)
    for (size_t n : mn)
      for (size_t k : ks) {
        check_shape(m, n, k, (seed % 3) * 3, seed);
        ++seed;
      }
}

TEST_CASE("gemm: larger shapes crossing the depth, column and row blocks") {
  // k > 128 crosses the depth block of the 512-bit kernel, n = 600 several column blocks,
  // m = 200 several row blocks; 257 and 128 sit around the widths.
  struct S {
    size_t m, n, k;
  };
  uint32_t seed = 500;
  for (S s : {S{128, 257, 257}, S{257, 128, 65}, S{65, 64, 257}, S{200, 256, 256}, S{200, 64, 256},
              S{7, 600, 300}, S{33, 1, 513}, S{1, 129, 1000}}) {
    check_shape(s.m, s.n, s.k, seed % 2 ? 5 : 0, seed);
    ++seed;
  }
}

TEST_CASE("gemm: k == 0 and alpha == 0 scale C by beta without reading A and B") {
  for (const auto* v : runnable(pl::KernelId::gemm)) {
    CAPTURE(v->name);
    auto fn = pl::as<GemmFn>(*v);
    std::vector<float> c = {1.f, 2.f, 3.f, 4.f, 5.f, 6.f};
    fn(0, 0, 2, 3, 0, 1.f, nullptr, 1, nullptr, 3, 0.5f, c.data(), 3);
    CHECK(c[0] == 0.5f);
    CHECK(c[5] == 3.f);
    std::vector<float> nan(6, std::numeric_limits<float>::quiet_NaN());
    fn(0, 0, 2, 3, 0, 1.f, nullptr, 1, nullptr, 3, 0.f, nan.data(), 3);
    for (float x : nan) CHECK(x == 0.f);
  }
}

TEST_CASE("gemm_batched: every batch entry at its strides, all transposes") {
  const size_t batch = 3;
  struct S {
    size_t m, n, k;
  };
  // n = 4 and n = 8 with k <= 256: the narrow path of gemm_batched.hwy; k = 300: the general one.
  for (S s : {S{1, 1, 1}, S{5, 9, 17}, S{16, 16, 16}, S{33, 7, 65}, S{17, 100, 4}, S{16, 4, 16},
              S{11, 8, 9}, S{9, 3, 300}})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (float beta : {-2.f, 0.f}) {
          CAPTURE(s.m);
          CAPTURE(s.n);
          CAPTURE(s.k);
          CAPTURE(ta);
          CAPTURE(tb);
          const size_t lda = (ta ? s.m : s.k) + 2, ldb = (tb ? s.k : s.n) + 1, ldc = s.n + 3;
          const size_t sa = (ta ? s.k : s.m) * lda + 7, sb = (tb ? s.n : s.k) * ldb + 1,
                       sc = s.m * ldc + 5;
          const auto a = pl::test::uniform(batch * sa, -1.f, 1.f, 3);
          const auto b = pl::test::uniform(batch * sb, -1.f, 1.f, 4);
          CAPTURE(beta);
          // beta == 0: C is not read (NaN there must not leak into the result)
          auto c0 = pl::test::uniform(batch * sc, -1.f, 1.f, 5);
          if (beta == 0.f)
            for (size_t q = 0; q < batch; ++q)
              for (size_t i = 0; i < s.m; ++i)
                for (size_t j = 0; j < s.n; ++j)
                  c0[q * sc + i * ldc + j] = std::numeric_limits<float>::quiet_NaN();
          const float alpha = 0.5f;
          std::vector<double> ref(batch * s.m * s.n);
          for (size_t q = 0; q < batch; ++q)
            for (size_t i = 0; i < s.m; ++i)
              for (size_t j = 0; j < s.n; ++j) {
                double acc = 0;
                for (size_t p = 0; p < s.k; ++p)
                  acc += double(ta ? a[q * sa + p * lda + i] : a[q * sa + i * lda + p]) *
                         double(tb ? b[q * sb + j * ldb + p] : b[q * sb + p * ldb + j]);
                ref[(q * s.m + i) * s.n + j] =
                    alpha * acc + (beta == 0.f ? 0.0 : beta * double(c0[q * sc + i * ldc + j]));
              }
          const double tol = 1e-5 * std::sqrt(double(s.k));
          for (const auto* v : runnable(pl::KernelId::gemm_batched)) {
            CAPTURE(v->name);
            auto c = c0;
            pl::as<GemmBatchedFn> (*v)(ta, tb, s.m, s.n, s.k, alpha, a.data(), lda, sa, b.data(),
                                       ldb, sb, beta, c.data(), ldc, sc, batch);
            std::vector<float> got(ref.size());
            bool rest_ok = true;
            for (size_t q = 0; q < batch; ++q)
              for (size_t i = 0; i < s.m; ++i)
                for (size_t j = 0; j < ldc; ++j) {
                  if (j < s.n)
                    got[(q * s.m + i) * s.n + j] = c[q * sc + i * ldc + j];
                  else
                    rest_ok &= c[q * sc + i * ldc + j] == c0[q * sc + i * ldc + j];
                }
            pl::test::check_close("C", got.data(), ref.data(), got.size(), tol, tol);
            CHECK(rest_ok);
          }
        }
}
