// SPDX-License-Identifier: Apache-2.0
// gelu_fwd_grad: harness cases (kernels/harness/harness.hpp) at the sizes of cases_gelu.cc,
// 4096 elements (in L1), 512 x 128 (the Markov model's call) and 8192 x 64, so phaselab_bench
// times it beside gelu and gelu_bwd. Budget as cases_gelu.cc: y rtol 1e-6; gelu' atol 2e-6 (terms'
// magnitude <= 1.13) + rtol 1e-6.
#include "kernels/gelu/gelu_ref.hpp"
#include "kernels/harness/harness.hpp"

namespace {

struct FwdGrad {
  std::vector<float> x, y, g;
  std::vector<double> ref_y, ref_g;
};

}  // namespace

PL_KERNEL_CASES {
  using pl::test::Output;
  for (size_t n : {size_t(4096), size_t(512 * 128), size_t(8192 * 64)}) {
    pl::test::add_case<FwdGrad>(
        {pl::KernelId::gelu_fwd_grad,
         "n:" + std::to_string(n),
         2e-6,
         1e-6,
         {double(n), 0, 12.0 * n},
         pl::test::Use::test_and_bench},
        [n](bool reference) {
          FwdGrad s{pl::test::uniform(n, -5.f, 5.f),
                    std::vector<float>(n),
                    std::vector<float>(n),
                    {},
                    {}};
          double mag;
          for (size_t i = 0; reference && i < n; ++i) {
            s.ref_y.push_back(pl::test::gelu_ref(s.x[i]));
            s.ref_g.push_back(pl::test::gelu_grad_ref(s.x[i], &mag));
          }
          return s;
        },
        [n](FwdGrad& s, const pl::Variant& v) {
          pl::as<decltype(&pl::scalar::GeluFwdGrad)>(v)(s.x.data(), s.y.data(), s.g.data(), n);
        },
        [n](const FwdGrad& s) {
          return std::vector<Output>{pl::test::out("y", s.y.data(), s.ref_y.data(), n),
                                     pl::test::out("dydx", s.g.data(), s.ref_g.data(), n)};
        });
  }
}
