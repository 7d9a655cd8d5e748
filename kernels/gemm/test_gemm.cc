// SPDX-License-Identifier: Apache-2.0
// gemm: what is not a shape sweep. The sweeps against op(A) op(B) in double (every transpose,
// shapes around the widths and across the blocks, padded strides, alpha/beta, gemm_batched's
// strides) are harness cases in cases_gemm.cc; here: k == 0 scales C by beta without reading A, B.
#include <limits>

#include "tests/support.hpp"

using pl::test::runnable;
using GemmFn = decltype(&pl::scalar::Gemm);

TEST_CASE("gemm: k == 0 and alpha == 0 scale C by beta without reading A and B") {
  for (const auto* v : runnable(pl::KernelId::gemm)) {
    CAPTURE(v->name);
    auto fn = pl::as<GemmFn>(*v);
    std::vector<float> c = {1.f, 2.f, 3.f, 4.f, 5.f, 6.f};
    fn(0, 0, 2, 3, 0, 1.f, nullptr, 1, nullptr, 3, 0.5f, c.data(), 3);
    CHECK(c[0] == 0.5f);
    CHECK(c[5] == 3.f);
    std::vector<float> nan(6, std::numeric_limits<float>::quiet_NaN());
    fn(0, 0, 2, 3, 0, 1.f, nullptr, 1, nullptr, 3, 0.f, nan.data(), 3);
    for (float x : nan) CHECK(x == 0.f);
  }
}
