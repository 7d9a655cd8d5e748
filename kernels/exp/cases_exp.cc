// SPDX-License-Identifier: Apache-2.0
// exp: harness cases (kernels/harness/harness.hpp), 64 and 4096 elements in [-10, 10].
// rtol 3e-7: the 2 ULP budget (test_exp.cc checks it in ULP over every exponent) plus the
// reference's own rounding to float.
#include <cmath>

#include "kernels/harness/harness.hpp"

namespace {

struct State {
  std::vector<float> x, y;
  std::vector<double> ref;
};

}  // namespace

PL_KERNEL_CASES {
  for (size_t n : {size_t(64), size_t(4096)}) {
    pl::test::add_case<State>(
        {pl::KernelId::exp,
         "n:" + std::to_string(n),
         0,
         3e-7,
         {double(n), 0, 8.0 * n},
         pl::test::Use::test_and_bench},
        [n](bool reference) {
          State s{pl::test::uniform(n, -10.f, 10.f), std::vector<float>(n), {}};
          if (reference)
            for (float x : s.x) s.ref.push_back(std::exp(double(x)));
          return s;
        },
        [n](State& s, const pl::Variant& v) {
          pl::as<decltype(&pl::scalar::Exp)>(v)(s.x.data(), s.y.data(), n);
        },
        [n](const State& s) {
          return std::vector<pl::test::Output>{pl::test::out("y", s.y.data(), s.ref.data(), n)};
        });
  }
}
