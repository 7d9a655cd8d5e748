// SPDX-License-Identifier: Apache-2.0
// gelu, gelu_bwd: harness cases (kernels/harness/harness.hpp): 4096 elements (in L1), 512 x 128
// (the Markov model's MLP activations per chunk call: 512 rows, d_ff 128) and 8192 x 64 (2 MiB
// per buffer). The per-element budget near the
// zero of gelu' (1e-6 of the terms' magnitude) is test_gelu.cc's; here gelu_bwd gets atol 2e-6
// (|dy| <= 1, terms' magnitude <= 1.13).
#include "kernels/gelu/gelu_ref.hpp"
#include "kernels/harness/harness.hpp"

namespace {

struct Fwd {
  std::vector<float> x, y;
  std::vector<double> ref;
};
struct Bwd {
  std::vector<float> x, dy, dx;
  std::vector<double> ref;
};

}  // namespace

PL_KERNEL_CASES {
  using pl::test::Output;
  for (size_t n : {size_t(4096), size_t(512 * 128), size_t(8192 * 64)}) {
    const std::string label = "n:" + std::to_string(n);
    pl::test::add_case<Fwd>(
        {pl::KernelId::gelu,
         label,
         1e-35,
         1e-6,
         {double(n), 0, 8.0 * n},
         pl::test::Use::test_and_bench},
        [n](bool reference) {
          Fwd s{pl::test::uniform(n, -5.f, 5.f), std::vector<float>(n), {}};
          if (reference)
            for (float x : s.x) s.ref.push_back(pl::test::gelu_ref(x));
          return s;
        },
        [n](Fwd& s, const pl::Variant& v) {
          pl::as<decltype(&pl::scalar::Gelu)>(v)(s.x.data(), s.y.data(), n);
        },
        [n](const Fwd& s) {
          return std::vector<Output>{pl::test::out("y", s.y.data(), s.ref.data(), n)};
        });
    pl::test::add_case<Bwd>(
        {pl::KernelId::gelu_bwd,
         label,
         2e-6,
         1e-6,
         {double(n), 0, 12.0 * n},
         pl::test::Use::test_and_bench},
        [n](bool reference) {
          Bwd s{pl::test::uniform(n, -5.f, 5.f),
                pl::test::uniform(n, -1.f, 1.f, 2),
                std::vector<float>(n),
                {}};
          double mag;
          for (size_t i = 0; reference && i < n; ++i)
            s.ref.push_back(s.dy[i] * pl::test::gelu_grad_ref(s.x[i], &mag));
          return s;
        },
        [n](Bwd& s, const pl::Variant& v) {
          pl::as<decltype(&pl::scalar::GeluBwd)>(v)(s.x.data(), s.dy.data(), s.dx.data(), n);
        },
        [n](const Bwd& s) {
          return std::vector<Output>{pl::test::out("dx", s.dx.data(), s.ref.data(), n)};
        });
  }
}
