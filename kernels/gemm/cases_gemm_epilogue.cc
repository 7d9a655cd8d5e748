// SPDX-License-Identifier: Apache-2.0
// gemm_epilogue: harness cases (kernels/harness/harness.hpp). Every case checks two things on
// every variant:
//   - C against (alpha op(A) op(B)) .* E or alpha op(A) op(B) + E in double, written here,
//     |err| <= (1e-5 + 1e-5 |ref|) sqrt(k), as the gemm cases;
//   - C bit for bit against the gemm variant of the same family and target ("gemm_epilogue.X" ->
//     "gemm.X") with beta 0 followed by the elementwise multiply or add in float: the fused
//     store must give exactly the bits of the two passes it replaces.
// Shapes around the vector widths (row and column tails), every transpose, alpha 1 and -1.5,
// padded strides of C and E (the padding of C must be kept), C filled with NaN (not read), and
// depths beyond every panel width's depth block (the epilogue only at the last block), few-row
// weight gradients that gemm computes as C^T = B^T A, and the Markov model's products (these
// are also benchmarks: the fused store against the gemm.* benchmarks of the same shape).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/gemm/cases_gemm_common.hpp"
#include "kernels/harness/harness.hpp"
#include "tests/emulation.hpp"

namespace {

using pl::test::out;
using pl::test::Output;
using pl::test::gemm_cases::kPad;
using pl::test::gemm_cases::tol_for;

struct Shape {
  size_t m, n, k;
  int ta, tb, kind;  // kind 1: C = P .* E, 2: C = P + E
  float alpha;
  size_t pad;
  uint32_t seed;
};

struct Epi {
  Shape s;
  size_t lda, ldb, lde, ldc;
  std::vector<float> a, b, e, c, got, twin;
  std::vector<double> ref, same;
  bool pad_ok = true, twin_found = false;
};

std::string label(const Shape& s) {
  return std::string(s.kind == 1 ? "mul/" : "add/") + (s.ta ? "t" : "n") + (s.tb ? "t" : "n") +
         "/m:" + std::to_string(s.m) + "/n:" + std::to_string(s.n) + "/k:" + std::to_string(s.k) +
         "/pad:" + std::to_string(s.pad) + "/alpha:" + pl::test::num(s.alpha);
}

void add_epilogue(Shape s, pl::test::Use use) {
  const double tol = tol_for(s.k);
  pl::test::add_case<Epi>(
      {pl::KernelId::gemm_epilogue,
       label(s),
       tol,
       tol,
       {double(s.m) * s.n * s.k, 2.0 * s.m * s.n * s.k + double(s.m) * s.n,
        4.0 * (s.m * s.k + s.k * s.n + 2 * s.m * s.n)},
       use},
      [=](bool reference) {
        Epi q;
        q.s = s;
        q.lda = (s.ta ? s.m : s.k) + s.pad;
        q.ldb = (s.tb ? s.k : s.n) + (s.pad ? s.pad + 1 : 0);
        q.lde = s.n + (s.pad ? s.pad + 2 : 0);
        q.ldc = s.n + (s.pad ? s.pad + 3 : 0);
        q.a = pl::test::uniform((s.ta ? s.k : s.m) * q.lda, -1.f, 1.f, s.seed);
        q.b = pl::test::uniform((s.tb ? s.n : s.k) * q.ldb, -1.f, 1.f, s.seed + 1);
        q.e = pl::test::uniform(s.m * q.lde, -1.f, 1.f, s.seed + 2);
        q.c.resize(s.m * q.ldc);
        for (size_t i = 0; i < s.m; ++i)  // C is not read: NaN must not leak into the result
          for (size_t j = 0; j < q.ldc; ++j)
            q.c[i * q.ldc + j] = j >= s.n ? kPad : std::numeric_limits<float>::quiet_NaN();
        q.got.resize(s.m * s.n);
        if (reference) {  // in double, from the stored matrices
          q.ref.assign(s.m * s.n, 0.0);
          for (size_t i = 0; i < s.m; ++i)
            for (size_t p = 0; p < s.k; ++p) {
              const double aip = s.ta ? q.a[p * q.lda + i] : q.a[i * q.lda + p];
              for (size_t j = 0; j < s.n; ++j)
                q.ref[i * s.n + j] += aip * (s.tb ? q.b[j * q.ldb + p] : q.b[p * q.ldb + j]);
            }
          for (size_t i = 0; i < s.m; ++i)
            for (size_t j = 0; j < s.n; ++j) {
              double& r = q.ref[i * s.n + j];
              const double e = q.e[i * q.lde + j];
              r = s.kind == 1 ? double(s.alpha) * r * e : double(s.alpha) * r + e;
            }
        }
        return q;
      },
      [](Epi& q, const pl::Variant& v) {
        const Shape& s = q.s;
        pl::as<decltype(&pl::scalar::GemmEpilogue)>(v)(s.ta, s.tb, s.m, s.n, s.k, s.alpha,
                                                       q.a.data(), q.lda, q.b.data(), q.ldb, s.kind,
                                                       q.e.data(), q.lde, q.c.data(), q.ldc);
      },
      [](Epi& q, const pl::Variant& v) {
        const Shape& s = q.s;
        q.pad_ok = true;
        for (size_t i = 0; i < s.m; ++i) {
          for (size_t j = 0; j < s.n; ++j) q.got[i * s.n + j] = q.c[i * q.ldc + j];
          for (size_t j = s.n; j < q.ldc; ++j) q.pad_ok &= q.c[i * q.ldc + j] == kPad;
        }
        // The two passes the kernel replaces, on the same family and target.
        const std::string twin = "gemm" + v.name.substr(std::strlen("gemm_epilogue"));
        const pl::Variant* g = pl::find_variant(twin);
        q.twin_found = g != nullptr && g->supported;
        q.same.assign(s.m * s.n, std::numeric_limits<double>::quiet_NaN());
        if (q.twin_found) {
          q.twin.assign(s.m * s.n, std::numeric_limits<float>::quiet_NaN());
          pl::as<decltype(&pl::scalar::Gemm)> (*g)(s.ta, s.tb, s.m, s.n, s.k, s.alpha, q.a.data(),
                                                   q.lda, q.b.data(), q.ldb, 0.f, q.twin.data(),
                                                   s.n);
          for (size_t i = 0; i < s.m; ++i)
            for (size_t j = 0; j < s.n; ++j) {
              const float x = q.twin[i * s.n + j], e = q.e[i * q.lde + j];
              q.same[i * s.n + j] = s.kind == 1 ? x * e : x + e;
            }
        }
        return std::vector<Output>{
            out("C", q.got.data(), q.ref.data(), s.m * s.n),
            out("C == " + twin + " then the elementwise op", q.got.data(), q.same.data(), s.m * s.n)
                .bitexact(),
            pl::test::holds("the gemm variant of the same target exists", q.twin_found),
            pl::test::holds("padding of C kept", q.pad_ok)};
      });
}

}  // namespace

PL_KERNEL_CASES {
  using pl::test::Use;
  // Row and column tails around the vector widths, every transpose, both epilogues; padded
  // strides on two seeds in three, alpha -1.5 on every other seed. Under emulation and in the
  // sanitizer tree (tests/emulation.hpp) each m x n takes one of the three depths in turn (800
  // of these 2400 cases): every m x n tail, transpose, epilogue kind, padding and alpha still
  // runs, each depth with a third of the m x n (and with one padding: the seed ties them);
  // the epilogue is the last depth block's store,
  // the same code at every depth, and the packing and depth loop are gemm's, whose sweep runs
  // every depth there.
  const size_t mn[] = {1, 7, 8, 9, 16, 17, 33, 64, 65, 100};
  const size_t ks[] = {1, 17, 64};
  const bool thin = pl::test::emulated() || pl::test::sanitized();
  uint32_t seed = 1;
  size_t shape = 0;
  for (size_t m : mn)
    for (size_t n : mn)
      for (size_t k : ks) {
        if (thin && k != ks[shape++ / 3 % 3]) {
          ++seed;
          continue;
        }
        for (int ta = 0; ta < 2; ++ta)
          for (int tb = 0; tb < 2; ++tb)
            for (int kind = 1; kind <= 2; ++kind)
              add_epilogue({m, n, k, ta, tb, kind, seed % 2 ? -1.5f : 1.f, (seed % 3) * 3, seed},
                           Use::test);
        ++seed;
      }
  // Depths beyond the depth blocks (128 to 1024 deep, by ISA and panel width): the epilogue
  // must run once, at the last block; n = 96 / 10 mix panel widths; tn 16 x 128 and 32 x 128 are
  // the few-row weight gradients gemm computes as C^T = B^T A; 200 rows cross the row blocks;
  // 7 x 4 x 2100 and 7 x 8 x 1100 cross the narrow panels' depth blocks (512 to 2048 deep by ISA)
  // within the emulated runs' work cap (2^18 FLOPs), so that the emulated targets run an
  // epilogue after earlier depth blocks too.
  struct S {
    size_t m, n, k;
  };
  seed = 700;
  for (S s : {S{128, 257, 257}, S{65, 64, 257}, S{200, 96, 600}, S{33, 10, 1100}, S{32, 128, 1100},
              S{16, 128, 300}, S{64, 33, 1030}, S{7, 4, 2100}, S{7, 8, 1100}}) {
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (int kind = 1; kind <= 2; ++kind)
          add_epilogue(
              {s.m, s.n, s.k, ta, tb, kind, seed % 2 ? -1.5f : 1.f, seed % 2 ? 5u : 0u, seed},
              Use::test);
    ++seed;
  }
  // The Markov model's fused products at d_model 32 and 64 (1024-row chunks): dg .* gelu'(u)
  // (nn R x 4d x d) and the residual adds (nt R x d x d, nt R x d x 4d).
  for (size_t d : {32, 64}) {
    add_epilogue({1024, 4 * d, d, 0, 0, 1, 1.f, 0, 11}, Use::test_and_bench);
    add_epilogue({1024, d, d, 0, 1, 2, 1.f, 0, 12}, Use::test_and_bench);
    add_epilogue({1024, d, 4 * d, 0, 1, 2, 1.f, 0, 13}, Use::test_and_bench);
  }
}
