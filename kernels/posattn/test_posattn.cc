// SPDX-License-Identifier: Apache-2.0
// posattn kernels: what is not a shape sweep. The sweeps against the dense double forward and
// backward, the finite-difference checks and the counts are harness cases in cases_posattn.cc;
// here: a perfect copy fit cancels to sse = 0 in the gram form.
#include <algorithm>
#include <cmath>

#include "tests/support.hpp"

using pl::test::runnable;
using GramFn = decltype(&pl::scalar::PosattnGramSse);

TEST_CASE("posattn_gram_sse: a perfect copy fit has sse = 0 to double rounding") {
  // A = the cyclic shift (row i attends to i - 1), W = I: r = 0 on every row. The three terms of
  // the gram form are each p L = 32000 here (integers, exact in double) and must cancel to 0;
  // the gradients too (a float accumulation would leave ~1e-3).
  const size_t p = 2000, l = 16, v = 4;
  std::vector<float> a(l * l, 0.f), w(v * v, 0.f);
  for (size_t i = 0; i < l; ++i) a[i * l + (i + l - 1) % l] = 1.f;
  for (size_t u = 0; u < v; ++u) w[u * v + u] = 1.f;
  const auto ux = pl::test::uniform(p * l, 0.f, 1.f, 99);
  std::vector<int32_t> xt(p * l), yt(p * l);
  for (size_t i = 0; i < p * l; ++i) xt[i] = std::min(int32_t(ux[i] * float(v)), int32_t(v) - 1);
  for (size_t mu = 0; mu < p; ++mu)
    for (size_t i = 0; i < l; ++i) yt[mu * l + i] = xt[mu * l + (i + l - 1) % l];
  std::vector<double> c(l * l * v * v, 0.0), d(c.size(), 0.0);
  pl::scalar::PosattnOnehotStats(xt.data(), yt.data(), c.data(), d.data(), p, l, v);
  for (const auto* var : runnable(pl::KernelId::posattn_gram_sse)) {
    CAPTURE(var->name);
    std::vector<float> da(l * l), dw(v * v);
    const double s =
        pl::as<GramFn>(*var)(a.data(), w.data(), c.data(), d.data(), da.data(), dw.data(), l, v);
    CHECK(std::fabs(s) <= 1e-9);
    for (float g : da) CHECK(std::fabs(g) <= 1e-9f);
    for (float g : dw) CHECK(std::fabs(g) <= 1e-9f);
  }
}
