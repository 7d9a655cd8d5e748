// SPDX-License-Identifier: Apache-2.0
#include <cmath>
#include <cstdint>
#include <vector>

#include "tests/support.hpp"

using pl::test::runnable;
using AdamFn = decltype(&pl::scalar::Adam);
using SgldFn = decltype(&pl::scalar::Sgld);
using GaussianFn = decltype(&pl::scalar::Gaussian);
using UniformFn = decltype(&pl::scalar::UniformBits);

namespace {

struct AdamState {
  std::vector<double> p, m, v;
};

// One Adam (decoupled == false) or AdamW step in double, straight from the formulas:
// bias-corrected moments mhat = m / (1 - b1^t), vhat = v / (1 - b2^t).
void adam_oracle(AdamState& s, const std::vector<float>& grad, double lr, double b1, double b2,
                 double eps, double wd, int64_t t, bool decoupled) {
  for (size_t i = 0; i < s.p.size(); ++i) {
    const double g = decoupled ? grad[i] : grad[i] + wd * s.p[i];
    s.m[i] = b1 * s.m[i] + (1 - b1) * g;
    s.v[i] = b2 * s.v[i] + (1 - b2) * g * g;
    const double mhat = s.m[i] / (1 - std::pow(b1, double(t)));
    const double vhat = s.v[i] / (1 - std::pow(b2, double(t)));
    s.p[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + (decoupled ? wd * s.p[i] : 0.0));
  }
}

// Several steps of every variant against the double oracle (state kept in double there).
// Budget after the first step (same starting state): param rounds once (2^-24 relative) and the
// update (~lr) carries a few float ulps: atol 1e-6 lr + rtol 2.4e-7. After 8 steps the float
// state has been rounded 8 times at magnitudes up to |p| ~ 1, so a param that has crossed 0
// carries up to 8 * 2^-24 absolute: atol 5e-7 + rtol 1e-6. m and v can cancel to ~0, so they get
// atol 1e-7 (their terms are O(1)).
void check_adam(pl::KernelId id, bool decoupled) {
  const float lr = 1e-2f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
  for (const auto* var : runnable(id)) {
    CAPTURE(var->name);
    auto fn = pl::as<AdamFn>(*var);
    for (float wd : {0.0f, 0.1f}) {
      for (int64_t first_step : {int64_t{1}, int64_t{1000}}) {
        for (size_t n : pl::test::sizes_around_widths()) {
          CAPTURE(wd);
          CAPTURE(first_step);
          CAPTURE(n);
          auto p = pl::test::uniform(n, -1.f, 1.f, 11 + uint32_t(n));
          std::vector<float> m(n + 1, 0.f), v(n + 1, 0.f);
          AdamState ref{std::vector<double>(p.begin(), p.end()), std::vector<double>(n, 0.0),
                        std::vector<double>(n, 0.0)};
          if (first_step > 1) {  // start from warm moments
            auto m0 = pl::test::uniform(n, -0.1f, 0.1f, 5);
            auto v0 = pl::test::uniform(n, 0.f, 0.01f, 6);
            for (size_t i = 0; i < n; ++i) {
              m[i] = m0[i];
              v[i] = v0[i];
              ref.m[i] = m0[i];
              ref.v[i] = v0[i];
            }
          }
          p.push_back(123.f);  // sentinels after the end must survive
          m[n] = v[n] = 123.f;
          for (int64_t t = first_step; t < first_step + 8; ++t) {
            const auto g = pl::test::uniform(n, -1.f, 1.f, 100 + uint32_t(t));
            fn(p.data(), g.data(), m.data(), v.data(), n, lr, b1, b2, eps, wd, t);
            adam_oracle(ref, g, lr, b1, b2, eps, wd, t, decoupled);
            if (t == first_step) {
              pl::test::check_close("param, 1 step", p.data(), ref.p.data(), n, 1e-6 * lr, 2.4e-7);
              pl::test::check_close("m, 1 step", m.data(), ref.m.data(), n, 1e-8, 2.4e-7);
              pl::test::check_close("v, 1 step", v.data(), ref.v.data(), n, 1e-10, 2.4e-7);
            }
          }
          pl::test::check_close("param", p.data(), ref.p.data(), n, 5e-7, 1e-6);
          pl::test::check_close("m", m.data(), ref.m.data(), n, 1e-7, 1e-6);
          pl::test::check_close("v", v.data(), ref.v.data(), n, 1e-9, 1e-6);
          CHECK(p[n] == 123.f);
          CHECK(m[n] == 123.f);
          CHECK(v[n] == 123.f);
        }
      }
    }
  }
}

}  // namespace

TEST_CASE(
    "adam: every variant follows the double formulas over 8 steps (L2 decay, bias correction)") {
  check_adam(pl::KernelId::adam, false);
}

TEST_CASE("adamw: every variant follows the double formulas over 8 steps (decoupled decay)") {
  check_adam(pl::KernelId::adamw, true);
}

TEST_CASE("adam vs adamw: identical without weight decay, different with it") {
  const size_t n = 100;
  auto g = pl::test::uniform(n, -1.f, 1.f, 3);
  for (float wd : {0.0f, 0.5f}) {
    auto p1 = pl::test::uniform(n, -1.f, 1.f, 4), p2 = p1;
    std::vector<float> m1(n, 0.f), v1(n, 0.f), m2(n, 0.f), v2(n, 0.f);
    pl::scalar::Adam(p1.data(), g.data(), m1.data(), v1.data(), n, 1e-2f, 0.9f, 0.999f, 1e-8f, wd,
                     1);
    pl::scalar::Adamw(p2.data(), g.data(), m2.data(), v2.data(), n, 1e-2f, 0.9f, 0.999f, 1e-8f, wd,
                      1);
    if (wd == 0.0f)
      CHECK(p1 == p2);
    else
      CHECK(p1 != p2);
  }
}

TEST_CASE("sgld: gradient step plus sqrt(2 eta T) times the gaussian stream, every variant") {
  const float eta = 1e-2f, temp = 0.5f;
  const double scale = std::sqrt(2.0 * eta * temp);
  const uint64_t seed = 77, stream = 5;
  for (const auto* var : runnable(pl::KernelId::sgld)) {
    CAPTURE(var->name);
    auto fn = pl::as<SgldFn>(*var);
    for (uint64_t counter : {uint64_t{0}, uint64_t{3}, uint64_t{4 * 0xFFFFFFFEull + 1}}) {
      for (size_t n : pl::test::sizes_around_widths()) {
        CAPTURE(counter);
        CAPTURE(n);
        auto theta = pl::test::uniform(n, -2.f, 2.f, 21 + uint32_t(n));
        const auto grad = pl::test::uniform(n, -3.f, 3.f, 22 + uint32_t(n));
        // Oracle: Box-Muller in double on the scalar uniform words (KAT-checked in test_random).
        const uint64_t first = counter - counter % 4;
        const size_t words = static_cast<size_t>(((counter + n + 3) / 4) * 4 - first);
        std::vector<uint32_t> u(words);
        pl::scalar::UniformBits(u.data(), words, seed, stream, first);
        std::vector<double> ref(n);
        for (size_t i = 0; i < n; ++i) {
          const size_t k = static_cast<size_t>(counter - first) + i, a = k & ~size_t{1};
          const double r = std::sqrt(-2.0 * std::log(((u[a] >> 8) + 1.0) * 0x1p-24));
          const double angle = 6.283185307179586 * (u[a + 1] >> 8) * 0x1p-24;
          const double xi = r * ((k & 1) ? std::sin(angle) : std::cos(angle));
          ref[i] = theta[i] - double{eta} * grad[i] + scale * xi;
        }
        theta.push_back(-7.f);
        fn(theta.data(), grad.data(), n, eta, temp, seed, stream, counter);
        // Noise error <= scale * 6 * 2^-24 * 5.8 (see the gaussian budget) plus rounding theta.
        pl::test::check_close("theta", theta.data(), ref.data(), n, scale * 6 * 0x1p-24 * 5.8,
                              2.4e-7);
        CHECK(theta[n] == -7.f);
      }
    }
  }
}

TEST_CASE("sgld: the noise is exactly the gaussian kernel's numbers on the same target") {
  // theta = grad = 0: theta becomes scale * xi, and xi must be what gaussian.<same backend.isa>
  // writes (compared to 2 float ulps of the product, far below the spacing of distinct samples).
  const size_t n = 777;
  const float eta = 0.02f, temp = 2.0f;
  const double scale = std::sqrt(2.0 * eta * temp);
  for (const auto* var : runnable(pl::KernelId::sgld)) {
    CAPTURE(var->name);
    const auto* gvar = pl::find_variant("gaussian" + var->name.substr(4));
    REQUIRE(gvar != nullptr);
    std::vector<float> xi(n), theta(n, 0.f), grad(n, 0.f);
    pl::as<GaussianFn> (*gvar)(xi.data(), n, 9, 1, 6);
    pl::as<SgldFn> (*var)(theta.data(), grad.data(), n, eta, temp, 9, 1, 6);
    std::vector<double> ref(n);
    for (size_t i = 0; i < n; ++i) ref[i] = scale * xi[i];
    pl::test::check_close("noise", theta.data(), ref.data(), n, 0, 2.4e-7);
  }
}

TEST_CASE("sgld: any split of a parameter range into calls gives the same bits") {
  const size_t n = 1000;
  const auto grad = pl::test::uniform(n, -1.f, 1.f, 8);
  for (const auto* var : runnable(pl::KernelId::sgld)) {
    CAPTURE(var->name);
    auto fn = pl::as<SgldFn>(*var);
    auto whole = pl::test::uniform(n, -1.f, 1.f, 9), parts = whole;
    fn(whole.data(), grad.data(), n, 1e-3f, 1.f, 3, 4, 10);
    for (size_t at = 0, k = 1; at < n; ++k) {
      const size_t len = std::min(n - at, (k * 29) % 53 + 1);
      fn(parts.data() + at, grad.data() + at, len, 1e-3f, 1.f, 3, 4, 10 + at);
      at += len;
    }
    CHECK(std::memcmp(whole.data(), parts.data(), n * sizeof(float)) == 0);
  }
}
