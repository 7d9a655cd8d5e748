// SPDX-License-Identifier: Apache-2.0
// sum, dot, max: what is not a shape sweep. The sweeps (bit-identity with kernels.def's order
// written out independently, the error bound against a compensated oracle, the largest element)
// are harness cases in cases_reduce.cc; here: exact closed forms and special values of max.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tests/support.hpp"

using pl::test::runnable;
using SumFn = decltype(&pl::scalar::Sum);
using DotFn = decltype(&pl::scalar::Dot);
using MaxFn = decltype(&pl::scalar::Max);

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

TEST_CASE("max: an inserted maximum in any slot, NaN anywhere gives NaN, inf, empty gives -inf") {
  const float inf = std::numeric_limits<float>::infinity();
  for (const auto* v : runnable(pl::KernelId::max)) {
    CAPTURE(v->name);
    auto fn = pl::as<MaxFn>(*v);
    CHECK(fn(nullptr, 0) == -inf);
    auto sizes = pl::test::sizes_around_widths();
    for (size_t n : {size_t{47}, size_t{49}, size_t{4096}, size_t{100003}}) sizes.push_back(n);
    for (size_t n : sizes) {
      CAPTURE(n);
      const auto x = pl::test::uniform(n, -1e3f, 1e3f, 7 + uint32_t(n));
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
