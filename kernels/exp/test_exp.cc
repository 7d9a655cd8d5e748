// SPDX-License-Identifier: Apache-2.0
#include <cmath>
#include <limits>

#include "tests/support.hpp"

using pl::test::runnable;

TEST_CASE("exp: every variant within 2 ULP of double exp over a sweep of bit patterns") {
  // Every 97th float bit pattern in the range where exp is a normal float: about 100k inputs
  // per sign, covering every exponent.
  std::vector<float> x;
  for (uint32_t bits = 0; bits < 0x80000000u; bits += 97 * 64) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      float f;
      const uint32_t b = bits | sign;
      std::memcpy(&f, &b, 4);
      if (std::isfinite(f) && f > -87.3f && f < 88.7f) x.push_back(f);
    }
  }
  REQUIRE(x.size() > 50000);
  std::vector<float> y(x.size());
  for (const auto* v : runnable(pl::KernelId::exp)) {
    CAPTURE(v->name);
    pl::as<decltype(&pl::scalar::Exp)> (*v)(x.data(), y.data(), x.size());
    int64_t worst = 0;
    float worst_x = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const float ref = static_cast<float>(std::exp(static_cast<double>(x[i])));
      const int64_t u = pl::test::ulp_distance(y[i], ref);
      if (u > worst || !std::isfinite(y[i])) {
        worst = std::isfinite(y[i]) ? u : INT64_MAX;
        worst_x = x[i];
      }
    }
    INFO("worst ULP " << worst << " at x = " << worst_x);
    CHECK(worst <= 2);
  }
}

TEST_CASE("exp: tails of every length and the extremes") {
  for (const auto* v : runnable(pl::KernelId::exp)) {
    CAPTURE(v->name);
    auto fn = pl::as<decltype(&pl::scalar::Exp)>(*v);
    for (size_t n : pl::test::sizes_around_widths()) {
      CAPTURE(n);
      auto x = pl::test::uniform(n, -20.f, 20.f, 7 + static_cast<uint32_t>(n));
      std::vector<float> y(n + 1, -1.f);  // sentinel after the end must survive
      fn(x.data(), y.data(), n);
      std::vector<double> ref(n);
      for (size_t i = 0; i < n; ++i) ref[i] = std::exp(static_cast<double>(x[i]));
      pl::test::check_close("exp", y.data(), ref.data(), n, 0.0, 3e-7);
      CHECK(y[n] == -1.f);
    }
    // Large negative arguments underflow to (nearly) zero, never NaN; in-place works.
    std::vector<float> big = {-1000.f, -200.f, -100.f, -88.f, 0.f, 1.f, 88.f};
    fn(big.data(), big.data(), big.size());
    for (size_t i = 0; i < 4; ++i) {
      CHECK(big[i] >= 0.f);
      CHECK(big[i] < 1e-37f);
    }
    CHECK(big[4] == 1.f);
    CHECK(pl::test::close(big[5], std::exp(1.0), 0, 3e-7));
    CHECK(std::isfinite(big[6]));
  }
}
