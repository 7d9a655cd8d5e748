// SPDX-License-Identifier: Apache-2.0
// gelu_fwd_grad: every runnable variant against the double oracle of gelu_ref.hpp (y and gelu'),
// central finite differences of the double forward, tails, sentinels and aliasing; and, per
// backend and ISA, the same bits as the gelu / gelu_bwd pair it replaces in the model: y equal to
// gelu's, and for the vector variants dy * dydx equal to gelu_bwd's (the scalar gelu_bwd rounds
// dy gelu'(x) once from double, so there the product may differ in the last bit).
// Budget as test_gelu.cc: atol 1e-35 + rtol 1e-6 (for gelu' of the terms' magnitude).
#include <cmath>
#include <limits>

#include "kernels/gelu/gelu_ref.hpp"
#include "tests/support.hpp"

namespace {

using FwdGradFn = decltype(&pl::scalar::GeluFwdGrad);
using GeluFn = decltype(&pl::scalar::Gelu);
using GeluBwdFn = decltype(&pl::scalar::GeluBwd);
constexpr double kRtol = 1e-6;
constexpr double kAtol = 1e-35;
using pl::test::gelu_grad_ref;
using pl::test::gelu_ref;

std::vector<float> inputs() {
  auto x = pl::test::uniform(4000, -3.f, 3.f, 31);
  auto wide = pl::test::uniform(4000, -14.f, 14.f, 32);
  x.insert(x.end(), wide.begin(), wide.end());
  const float big = std::numeric_limits<float>::max();
  for (float s : {0.f,   -0.f, 1e-30f, -1e-30f, 1e-6f,  -0.7517916f, -0.75179f, 1.f,   -1.f,
                  5.f,   -5.f, 9.3f,   -9.3f,   9.5f,   -9.5f,       10.f,      -10.f, 20.f,
                  -20.f, 25.f, -25.f,  1e30f,   -1e30f, big,         -big})
    x.push_back(s);
  return x;
}

// Counts elements of (y, dydx) outside the budget against the double oracle.
size_t count_bad(const float* x, const float* y, const float* g, size_t n) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    double mag;
    const double ry = gelu_ref(x[i]), rg = gelu_grad_ref(x[i], &mag);
    const bool ok_y = std::fabs(y[i] - ry) <= kAtol + kRtol * std::fabs(ry);
    const bool ok_g = std::fabs(g[i] - rg) <= kAtol + kRtol * mag;
    if (!(ok_y && ok_g) && ++bad <= 3) {
      INFO("x = " << x[i] << ": y " << y[i] << " ref " << ry << ", gelu' " << g[i] << " ref "
                  << rg);
      CHECK(false);
    }
  }
  return bad;
}

}  // namespace

TEST_CASE("gelu_fwd_grad: every variant vs the double oracle, tails, sentinels, aliasing") {
  const auto x = inputs();
  const auto vs = pl::test::runnable(pl::KernelId::gelu_fwd_grad);
  REQUIRE(!vs.empty());
  for (const auto* v : vs) {
    CAPTURE(v->name);
    auto fn = pl::as<FwdGradFn>(*v);
    std::vector<float> y(x.size()), g(x.size());
    fn(x.data(), y.data(), g.data(), x.size());
    CHECK(count_bad(x.data(), y.data(), g.data(), x.size()) == 0);
    for (size_t n : pl::test::sizes_around_widths()) {
      CAPTURE(n);
      const auto xs = pl::test::uniform(n, -6.f, 6.f, uint32_t(n + 7));
      std::vector<float> ys(n + 1, -1.f), gs(n + 1, -2.f);
      fn(xs.data(), ys.data(), gs.data(), n);
      CHECK(count_bad(xs.data(), ys.data(), gs.data(), n) == 0);
      CHECK(ys[n] == -1.f);
      CHECK(gs[n] == -2.f);
      // In place: x overwritten by gelu'(x) (how the model stores it), or by gelu(x).
      std::vector<float> a = xs, b = xs, o(n);
      fn(a.data(), o.data(), a.data(), n);
      CHECK(std::equal(a.begin(), a.end(), gs.begin()));
      CHECK(std::equal(o.begin(), o.end(), ys.begin()));
      fn(b.data(), b.data(), o.data(), n);
      CHECK(std::equal(b.begin(), b.end(), ys.begin()));
      CHECK(std::equal(o.begin(), o.end(), gs.begin()));
    }
  }
}

TEST_CASE("gelu_fwd_grad: gelu' matches central finite differences of the double forward") {
  // Truncation error h^2 |gelu'''| / 6 < 1e-8 at h = 1e-4 (as test_gelu.cc).
  const auto x = pl::test::uniform(2000, -6.f, 6.f, 33);
  const double h = 1e-4;
  for (const auto* v : pl::test::runnable(pl::KernelId::gelu_fwd_grad)) {
    CAPTURE(v->name);
    std::vector<float> y(x.size()), g(x.size());
    pl::as<FwdGradFn> (*v)(x.data(), y.data(), g.data(), x.size());
    size_t bad = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double fd = (gelu_ref(x[i] + h) - gelu_ref(x[i] - h)) / (2 * h);
      double mag;
      gelu_grad_ref(x[i], &mag);
      if (!(std::fabs(g[i] - fd) <= 1e-8 + kRtol * mag) && ++bad <= 3) {
        INFO("x = " << x[i] << " got " << g[i] << " fd " << fd);
        CHECK(false);
      }
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("gelu_fwd_grad: the same bits as gelu and gelu_bwd of the same backend and ISA") {
  const auto x = inputs();
  const auto dy = pl::test::uniform(x.size(), -2.f, 2.f, 34);
  size_t pairs = 0;
  for (const auto* v : pl::test::runnable(pl::KernelId::gelu_fwd_grad)) {
    const std::string suffix = v->name.substr(v->name.find('.'));  // ".hwy.avx512", ".scalar"
    const auto* vf = pl::find_variant("gelu" + suffix);
    const auto* vb = pl::find_variant("gelu_bwd" + suffix);
    if (!vf || !vb) continue;
    CAPTURE(v->name);
    ++pairs;
    std::vector<float> y(x.size()), g(x.size()), y1(x.size()), dx1(x.size());
    pl::as<FwdGradFn> (*v)(x.data(), y.data(), g.data(), x.size());
    pl::as<GeluFn> (*vf)(x.data(), y1.data(), x.size());
    pl::as<GeluBwdFn> (*vb)(x.data(), dy.data(), dx1.data(), x.size());
    size_t diff_y = 0, diff_dx = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::memcmp(&y[i], &y1[i], sizeof(float)) != 0 && ++diff_y <= 3)
        MESSAGE("x = " << x[i] << ": gelu_fwd_grad " << y[i] << ", gelu " << y1[i]);
      const float dx = dy[i] * g[i];
      diff_dx += std::memcmp(&dx, &dx1[i], sizeof(float)) != 0;
    }
    CHECK(diff_y == 0);
    if (std::string(v->backend) != "scalar") CHECK(diff_dx == 0);
  }
  CHECK(pairs > 0);
}
