// SPDX-License-Identifier: Apache-2.0
// posattn_onehot_sse_rows: every runnable variant against a dense double evaluation of the
// definition restricted to the output rows [i0, i1) (written here), rows outside the range of da
// left untouched; the whole range bit-equal to posattn_onehot_sse of the same target; blocks of
// rows adding up to the whole call (sse, dw to float rounding; da rows exactly).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "tests/support.hpp"

using pl::test::runnable;

namespace {

using RowsFn = decltype(&pl::scalar::PosattnOnehotSseRows);
using OnehotFn = decltype(&pl::scalar::PosattnOnehotSse);

struct Case {
  size_t p, l, v;
  std::vector<float> a, w;
  std::vector<int32_t> xt, yt;
};

Case make_case(size_t p, size_t l, size_t v) {
  const uint32_t seed = uint32_t(p * 7919 + l * 31 + v);
  Case c{p,
         l,
         v,
         pl::test::uniform(l * l, -1.f, 1.f, seed),
         pl::test::uniform(v * v, -1.f, 1.f, seed + 1),
         std::vector<int32_t>(p * l),
         std::vector<int32_t>(p * l)};
  const auto ux = pl::test::uniform(p * l, 0.f, 1.f, seed + 2),
             uy = pl::test::uniform(p * l, 0.f, 1.f, seed + 3);
  for (size_t i = 0; i < p * l; ++i) {
    c.xt[i] = std::min(int32_t(ux[i] * float(v)), int32_t(v) - 1);
    c.yt[i] =
        uy[i] < 0.2f ? -1 : std::min(int32_t((uy[i] - 0.2f) / 0.8f * float(v)), int32_t(v) - 1);
  }
  return c;
}

// The definition in double, rows [i0, i1) only: h_i = sum_k A[i, k] e_{x_k},
// r_i = W h_i - e_{y_i} (0 if y_i < 0), sse = sum |r_i|^2, da[i, k] = 2 (W^T r_i)[x_k],
// dw = 2 sum_i r_i h_i^T.
double oracle(const Case& c, size_t i0, size_t i1, std::vector<double>& da,
              std::vector<double>& dw) {
  const size_t l = c.l, v = c.v;
  da.assign(l * l, 0.0);
  dw.assign(v * v, 0.0);
  double sse = 0;
  std::vector<double> h(v), r(v);
  for (size_t mu = 0; mu < c.p; ++mu) {
    const int32_t* x = &c.xt[mu * l];
    for (size_t i = i0; i < i1; ++i) {
      std::fill(h.begin(), h.end(), 0.0);
      for (size_t k = 0; k < l; ++k) h[size_t(x[k])] += c.a[i * l + k];
      const int32_t y = c.yt[mu * l + i];
      for (size_t o = 0; o < v; ++o) {
        double f = 0;
        for (size_t u = 0; u < v; ++u) f += double(c.w[o * v + u]) * h[u];
        r[o] = y < 0 ? 0.0 : f - (y == int32_t(o) ? 1.0 : 0.0);
        sse += r[o] * r[o];
        for (size_t u = 0; u < v; ++u) dw[o * v + u] += 2 * r[o] * h[u];
      }
      for (size_t k = 0; k < l; ++k) {
        double g = 0;
        for (size_t o = 0; o < v; ++o) g += r[o] * c.w[o * v + size_t(x[k])];
        da[i * l + k] += 2 * g;
      }
    }
  }
  return sse;
}

// The variant of `kernel` on the same target as `rows_variant` (names "<kernel>.<target>").
const pl::Variant* same_target(pl::KernelId kernel, const std::string& rows_variant) {
  const std::string target = rows_variant.substr(rows_variant.find('.'));
  for (const auto* var : runnable(kernel))
    if (var->name.substr(var->name.find('.')) == target) return var;
  return nullptr;
}

}  // namespace

TEST_CASE("posattn_onehot_sse_rows: the double definition on row ranges, other rows untouched") {
  const float kSentinel = 12345.f;
  for (size_t v : {2, 4, 5})
    for (size_t l : {1, 3, 16, 21, 37})
      for (size_t p : {1, 9}) {
        const Case c = make_case(p, l, v);
        std::vector<std::pair<size_t, size_t>> ranges = {
            {0, l}, {0, 1}, {l - 1, l}, {l / 3, l}, {l / 2, l / 2}};
        if (l > 4) ranges.push_back({2, l - 2});
        if (l > 20) ranges.push_back({5, 19});
        for (const auto& [i0, i1] : ranges) {
          CAPTURE(p);
          CAPTURE(l);
          CAPTURE(v);
          CAPTURE(i0);
          CAPTURE(i1);
          std::vector<double> da_ref, dw_ref;
          const double sse = oracle(c, i0, i1, da_ref, dw_ref);
          const double inner = double(l * v);
          const double tol = 1e-5 * std::sqrt(inner);
          for (const auto* var : runnable(pl::KernelId::posattn_onehot_sse_rows)) {
            CAPTURE(var->name);
            const auto fn = pl::as<RowsFn>(*var);
            std::vector<float> da(l * l, kSentinel), dw(v * v, kSentinel);
            const double s0 = fn(c.a.data(), c.w.data(), c.xt.data(), c.yt.data(), nullptr, nullptr,
                                 p, l, v, i0, i1);
            CHECK(pl::test::close(s0, sse, tol, tol));
            const double s1 = fn(c.a.data(), c.w.data(), c.xt.data(), c.yt.data(), da.data(),
                                 dw.data(), p, l, v, i0, i1);
            CHECK(s1 == s0);
            pl::test::check_close("dW", dw.data(), dw_ref.data(), v * v, tol, tol);
            for (size_t i = 0; i < l; ++i) {
              CAPTURE(i);
              if (i >= i0 && i < i1) {
                pl::test::check_close("dA row", da.data() + i * l, da_ref.data() + i * l, l, tol,
                                      tol);
              } else {
                CHECK(std::all_of(da.begin() + long(i * l), da.begin() + long((i + 1) * l),
                                  [&](float e) { return e == kSentinel; }));
              }
            }
          }
        }
      }
}

TEST_CASE("posattn_onehot_sse_rows: [0, L) is posattn_onehot_sse bit for bit; blocks add up") {
  for (size_t v : {4, 7})
    for (size_t l : {5, 33, 70})
      for (size_t p : {1, 11}) {
        CAPTURE(p);
        CAPTURE(l);
        CAPTURE(v);
        const Case c = make_case(p, l, v);
        for (const auto* var : runnable(pl::KernelId::posattn_onehot_sse_rows)) {
          CAPTURE(var->name);
          const auto rows = pl::as<RowsFn>(*var);
          const pl::Variant* whole_var = same_target(pl::KernelId::posattn_onehot_sse, var->name);
          REQUIRE(whole_var != nullptr);
          const auto whole = pl::as<OnehotFn>(*whole_var);
          std::vector<float> da1(l * l), dw1(v * v), da2(l * l), dw2(v * v);
          const double s1 = whole(c.a.data(), c.w.data(), c.xt.data(), c.yt.data(), da1.data(),
                                  dw1.data(), p, l, v);
          const double s2 = rows(c.a.data(), c.w.data(), c.xt.data(), c.yt.data(), da2.data(),
                                 dw2.data(), p, l, v, 0, l);
          CHECK(s2 == s1);
          CHECK(std::memcmp(da1.data(), da2.data(), da1.size() * sizeof(float)) == 0);
          CHECK(std::memcmp(dw1.data(), dw2.data(), dw1.size() * sizeof(float)) == 0);
          // Blocks of 3 rows (most start and end inside a vector): sse and dw add up to the whole
          // call's to rounding, the da rows are the whole call's exactly.
          std::vector<float> da3(l * l, -1.f), dw_blk(v * v);
          std::vector<double> dw_sum(v * v, 0.0);
          double s3 = 0;
          for (size_t r0 = 0; r0 < l; r0 += 3) {
            s3 += rows(c.a.data(), c.w.data(), c.xt.data(), c.yt.data(), da3.data(), dw_blk.data(),
                       p, l, v, r0, std::min(l, r0 + 3));
            for (size_t i = 0; i < v * v; ++i) dw_sum[i] += dw_blk[i];
          }
          const double tol = 1e-5 * std::sqrt(double(p * l * v));
          CHECK(pl::test::close(s3, s1, tol, tol));
          CHECK(std::memcmp(da1.data(), da3.data(), da1.size() * sizeof(float)) == 0);
          pl::test::check_close("dW of the blocks", dw1.data(), dw_sum.data(), v * v, tol, tol);
        }
      }
}
