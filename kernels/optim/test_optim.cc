// SPDX-License-Identifier: Apache-2.0
// adam, adamw, sgld: what is not a shape sweep. The sweeps against the double formulas are
// harness cases in cases_optim.cc; here: Adam and AdamW agree exactly without weight decay, SGLD's
// noise is the gaussian kernel's numbers, and any split of a range into calls gives the same bits.
#include <cmath>
#include <cstdint>
#include <vector>

#include "tests/support.hpp"

using pl::test::runnable;
using SgldFn = decltype(&pl::scalar::Sgld);
using GaussianFn = decltype(&pl::scalar::Gaussian);

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
