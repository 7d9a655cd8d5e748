// SPDX-License-Identifier: Apache-2.0
// gelu / gelu_bwd: every runnable variant against a double-precision oracle written here, the
// oracle against the textbook tanh form, and the backward pass against central finite
// differences of the double forward.
//
// Budget (docs/kernels.md): relative error <= 1e-6 per element, as atol + rtol |ref| with rtol =
// 1e-6 and atol = 1e-35: for x < -9.5 gelu(x) falls below ~1e-35, within a factor ~1000 of float's
// subnormal range (1.2e-38), where relative accuracy is not possible.
#include <cmath>
#include <limits>

#include "kernels/gelu/gelu_ref.hpp"
#include "tests/support.hpp"

namespace {

using GeluFn = decltype(&pl::scalar::Gelu);
using GeluBwdFn = decltype(&pl::scalar::GeluBwd);
constexpr double kRtol = 1e-6;
constexpr double kAtol = 1e-35;
const double kC = std::sqrt(2.0 / M_PI);
using pl::test::gelu_grad_ref;
using pl::test::gelu_ref;

// Dense near 0, the whole interesting range, the underflow region, and special values.
std::vector<float> test_inputs() {
  auto x = pl::test::uniform(4000, -3.f, 3.f, 11);
  auto wide = pl::test::uniform(4000, -14.f, 14.f, 12);
  x.insert(x.end(), wide.begin(), wide.end());
  const float big = std::numeric_limits<float>::max();
  for (float s : {0.f,   -0.f, 1e-30f, -1e-30f, 1e-6f,  -0.7517916f, -0.75179f, 1.f,    -1.f,
                  5.f,   -5.f, 9.5f,   -9.5f,   10.f,   -10.f,       10.1f,     -10.1f, 20.f,
                  -20.f, 25.f, -25.f,  1e30f,   -1e30f, big,         -big})
    x.push_back(s);
  return x;
}

}  // namespace

TEST_CASE("gelu: the oracle equals the textbook tanh form where that form is accurate") {
  for (double x = -4; x <= 6; x += 0.01) {
    const double u = kC * (x + 0.044715 * x * x * x);
    CHECK(pl::test::close(gelu_ref(x), 0.5 * x * (1 + std::tanh(u)), 1e-14, 1e-12));
  }
}

TEST_CASE("gelu: every variant vs the double oracle") {
  const auto x = test_inputs();
  std::vector<double> ref(x.size());
  for (size_t i = 0; i < x.size(); ++i) ref[i] = gelu_ref(x[i]);
  for (const auto* v : pl::test::runnable(pl::KernelId::gelu)) {
    CAPTURE(v->name);
    auto fn = pl::as<GeluFn>(*v);
    std::vector<float> y(x.size());
    fn(x.data(), y.data(), x.size());
    pl::test::check_close("gelu", y.data(), ref.data(), x.size(), kAtol, kRtol);
    // Tails of every length, the sentinel after the end intact, in place equal.
    for (size_t n : pl::test::sizes_around_widths()) {
      CAPTURE(n);
      auto xs = pl::test::uniform(n, -6.f, 6.f, uint32_t(n));
      std::vector<float> ys(n + 1, -1.f);
      fn(xs.data(), ys.data(), n);
      std::vector<double> r(n);
      for (size_t i = 0; i < n; ++i) r[i] = gelu_ref(xs[i]);
      pl::test::check_close("gelu tail", ys.data(), r.data(), n, kAtol, kRtol);
      CHECK(ys[n] == -1.f);
      fn(xs.data(), xs.data(), n);
      CHECK(std::equal(xs.begin(), xs.end(), ys.begin()));
    }
  }
}

TEST_CASE("gelu_bwd: every variant vs the double derivative") {
  const auto x = test_inputs();
  const auto dy = pl::test::uniform(x.size(), -2.f, 2.f, 13);
  std::vector<double> ref(x.size()), tol(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double mag;
    ref[i] = dy[i] * gelu_grad_ref(x[i], &mag);
    tol[i] = kAtol + kRtol * std::fabs(dy[i]) * mag;
  }
  for (const auto* v : pl::test::runnable(pl::KernelId::gelu_bwd)) {
    CAPTURE(v->name);
    auto fn = pl::as<GeluBwdFn>(*v);
    std::vector<float> dx(x.size());
    fn(x.data(), dy.data(), dx.data(), x.size());
    size_t bad = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (!(std::fabs(dx[i] - ref[i]) <= tol[i])) {
        if (++bad <= 3) {  // report the first few
          INFO("x = " << x[i] << ": got " << dx[i] << " ref " << ref[i] << " tol " << tol[i]);
          CHECK(false);
        }
      }
    }
    CHECK(bad == 0);
    // Tails, sentinel, dx aliasing dy.
    for (size_t n : pl::test::sizes_around_widths()) {
      CAPTURE(n);
      auto xs = pl::test::uniform(n, -6.f, 6.f, uint32_t(n));
      auto dys = pl::test::uniform(n, -1.f, 1.f, uint32_t(n + 1));
      std::vector<float> dxs(n + 1, -1.f);
      fn(xs.data(), dys.data(), dxs.data(), n);
      for (size_t i = 0; i < n; ++i) {
        double mag;
        const double r = dys[i] * gelu_grad_ref(xs[i], &mag);
        if (!(std::fabs(dxs[i] - r) <= kAtol + kRtol * std::fabs(dys[i]) * mag)) {
          CAPTURE(i);
          FAIL_CHECK("gelu_bwd tail: got " << dxs[i] << " ref " << r);
        }
      }
      CHECK(dxs[n] == -1.f);
      fn(xs.data(), dys.data(), dys.data(), n);
      CHECK(std::equal(dys.begin(), dys.end(), dxs.begin()));
    }
  }
}

TEST_CASE("gelu_bwd: matches central finite differences of the double forward") {
  // Objective L(x) = sum dy .* gelu(x): dL/dx[i] = (L(x + h e_i) - L(x - h e_i)) / 2h, which for
  // an elementwise map only needs gelu at x[i] +- h. Truncation error h^2 |gelu'''| / 6 < 1e-8;
  // the kernel's own error is budgeted as in the test above (1e-6 of the terms' magnitude).
  const auto x = pl::test::uniform(2000, -6.f, 6.f, 21);
  const auto dy = pl::test::uniform(x.size(), -1.f, 1.f, 22);
  const double h = 1e-4;
  for (const auto* v : pl::test::runnable(pl::KernelId::gelu_bwd)) {
    CAPTURE(v->name);
    std::vector<float> dx(x.size());
    pl::as<GeluBwdFn> (*v)(x.data(), dy.data(), dx.data(), x.size());
    size_t bad = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double fd = dy[i] * (gelu_ref(x[i] + h) - gelu_ref(x[i] - h)) / (2 * h);
      double mag;
      gelu_grad_ref(x[i], &mag);
      if (!(std::fabs(dx[i] - fd) <= 1e-8 + kRtol * std::fabs(dy[i]) * mag)) {
        ++bad;
        INFO("x = " << x[i] << " got " << dx[i] << " fd " << fd);
        CHECK(false);
      }
    }
    CHECK(bad == 0);
  }
}
