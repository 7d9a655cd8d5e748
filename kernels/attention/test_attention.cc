// SPDX-License-Identifier: Apache-2.0
// attention: what is not a shape sweep. The sweeps against the double forward and backward and
// the finite-difference checks are harness cases in cases_attention.cc; here: large scores.
#include <cmath>

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
