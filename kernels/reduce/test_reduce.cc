// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "tests/support.hpp"

using pl::test::runnable;
using SumFn = decltype(&pl::scalar::Sum);
using DotFn = decltype(&pl::scalar::Dot);
using MaxFn = decltype(&pl::scalar::Max);

namespace {

// Values over ~80 binary orders of magnitude with both signs: any change of summation order
// changes the rounded result, so bit-identity below really tests the order.
std::vector<float> wide_range(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::uniform_int_distribution<int> e(-40, 40);
  std::vector<float> v(n);
  for (auto& x : v) x = std::ldexp(u(g), e(g));
  return v;
}

// Kahan-Babuska (Neumaier) summation in long double: the oracle, far more accurate than the
// kernels' double accumulation.
template <typename F>
long double compensated(size_t n, F term) {
  long double s = 0, c = 0;
  for (size_t i = 0; i < n; ++i) {
    const long double t = term(i), u = s + t;
    c += std::fabs(s) >= std::fabs(t) ? (s - u) + t : (t - u) + s;
    s = u;
  }
  return s + c;
}

// Sizes: around every vector width and the 16-accumulator block, plus long ones.
std::vector<size_t> reduce_sizes() {
  auto s = pl::test::sizes_around_widths();
  for (size_t n : {size_t{0}, size_t{47}, size_t{49}, size_t{4096}, size_t{100003}}) s.push_back(n);
  return s;
}

}  // namespace

TEST_CASE(
    "sum, dot: every variant bit-identical to the scalar order and within the bound of the "
    "oracle") {
  const auto xs = wide_range(100003 + 3, 1), ys = wide_range(100003 + 3, 2);
  for (size_t off : {size_t{0}, size_t{1}, size_t{3}}) {  // unaligned starts
    for (size_t n : reduce_sizes()) {
      CAPTURE(off);
      CAPTURE(n);
      const float* x = xs.data() + off;
      const float* y = ys.data() + off;
      const double ref_sum = pl::scalar::Sum(x, n), ref_dot = pl::scalar::Dot(x, y, n);
      // Error bound of summing n terms in double in any order: (n - 1) 2^-53 sum |t_i|
      // (the dot's products are exact in double).
      const long double abs_sum =
          compensated(n, [&](size_t i) { return std::fabs((long double)x[i]); });
      const long double abs_dot =
          compensated(n, [&](size_t i) { return std::fabs((long double)x[i] * y[i]); });
      const long double oracle_sum = compensated(n, [&](size_t i) { return (long double)x[i]; });
      const long double oracle_dot =
          compensated(n, [&](size_t i) { return (long double)x[i] * (long double)y[i]; });
      CHECK(std::fabs(ref_sum - oracle_sum) <= (n + 1) * 0x1p-53 * abs_sum);
      CHECK(std::fabs(ref_dot - oracle_dot) <= (n + 1) * 0x1p-53 * abs_dot);
      for (const auto* v : runnable(pl::KernelId::sum)) {
        CAPTURE(v->name);
        const double got = pl::as<SumFn>(*v)(x, n);
        CHECK(std::memcmp(&got, &ref_sum, sizeof got) == 0);
      }
      for (const auto* v : runnable(pl::KernelId::dot)) {
        CAPTURE(v->name);
        const double got = pl::as<DotFn>(*v)(x, y, n);
        CHECK(std::memcmp(&got, &ref_dot, sizeof got) == 0);
      }
    }
  }
}

TEST_CASE("sum, dot: the data is order-sensitive, and the reference follows kernels.def's order") {
  // Shows that bit-identity above is meaningful: the plain left-to-right double sum differs.
  const size_t n = 100003;
  const auto x = wide_range(n, 1);
  double naive = 0;
  for (float v : x) naive += v;
  CHECK(naive != pl::scalar::Sum(x.data(), n));
  // The order itself, written out independently: accumulators i mod 16, then the tree.
  double acc[16] = {};
  for (size_t i = 0; i < n; ++i) acc[i % 16] += x[i];
  const double t8[8] = {acc[0] + acc[8],  acc[1] + acc[9],  acc[2] + acc[10], acc[3] + acc[11],
                        acc[4] + acc[12], acc[5] + acc[13], acc[6] + acc[14], acc[7] + acc[15]};
  const double t4[4] = {t8[0] + t8[4], t8[1] + t8[5], t8[2] + t8[6], t8[3] + t8[7]};
  const double expect = (t4[0] + t4[2]) + (t4[1] + t4[3]);
  CHECK(expect == pl::scalar::Sum(x.data(), n));
}

TEST_CASE("sum, dot: exact closed forms") {
  // Integers up to 2^24 and their sums are exact in double: sum 0..n-1 = n(n-1)/2, and
  // dot(i, i) = (n-1) n (2n-1) / 6 (< 2^53 for n = 40000).
  const size_t n = 40000;
  std::vector<float> x(n), ones(n, 1.f);
  for (size_t i = 0; i < n; ++i) x[i] = float(i);
  for (const auto* v : runnable(pl::KernelId::sum)) {
    CAPTURE(v->name);
    CHECK(pl::as<SumFn>(*v)(x.data(), n) == double(n) * (n - 1) / 2);
    CHECK(pl::as<SumFn>(*v)(x.data(), 0) == 0.0);
  }
  for (const auto* v : runnable(pl::KernelId::dot)) {
    CAPTURE(v->name);
    CHECK(pl::as<DotFn>(*v)(x.data(), ones.data(), n) == double(n) * (n - 1) / 2);
    CHECK(pl::as<DotFn>(*v)(x.data(), x.data(), n) == double(n - 1) * n * (2 * n - 1) / 6);
    CHECK(pl::as<DotFn>(*v)(x.data(), x.data(), 0) == 0.0);
  }
}

TEST_CASE(
    "max: every variant equals the largest element; NaN anywhere gives NaN; empty gives -inf") {
  const float inf = std::numeric_limits<float>::infinity();
  for (const auto* v : runnable(pl::KernelId::max)) {
    CAPTURE(v->name);
    auto fn = pl::as<MaxFn>(*v);
    CHECK(fn(nullptr, 0) == -inf);
    for (size_t n : reduce_sizes()) {
      if (n == 0) continue;
      CAPTURE(n);
      auto x = wide_range(n, 7 + uint32_t(n));
      const float expect = *std::max_element(x.begin(), x.end());
      const float got = fn(x.data(), n);
      CHECK(got == expect);
      CHECK(got == pl::scalar::Max(x.data(), n));
      // The maximum in each possible accumulator slot and at the very end.
      for (size_t at : {size_t{0}, n / 2, n - 1}) {
        CAPTURE(at);
        auto y = x;
        y[at] = 1e30f;
        CHECK(fn(y.data(), n) == 1e30f);
        y[at] = std::numeric_limits<float>::quiet_NaN();
        CHECK(std::isnan(fn(y.data(), n)));
        y[at] = inf;
        CHECK(fn(y.data(), n) == inf);
      }
    }
    std::vector<float> all_neg_inf(33, -inf);
    CHECK(fn(all_neg_inf.data(), 33) == -inf);
    std::vector<float> nan_only(20, std::numeric_limits<float>::quiet_NaN());
    CHECK(std::isnan(fn(nan_only.data(), 20)));
    // Signed zeros: bit-identical to the scalar reference (the first of equal values stays).
    std::vector<float> zeros(40);
    for (size_t i = 0; i < zeros.size(); ++i) zeros[i] = (i * 7) % 3 ? -0.f : 0.f;
    const float got = fn(zeros.data(), zeros.size()),
                ref = pl::scalar::Max(zeros.data(), zeros.size());
    CHECK(std::memcmp(&got, &ref, sizeof got) == 0);
  }
}
