// SPDX-License-Identifier: Apache-2.0
// GELU (tanh approximation) and its derivative in double: the oracle of test_gelu.cc and of the
// harness cases (cases_gelu.cc).
#pragma once

#include <cmath>

namespace pl::test {

// z = 2u, u = sqrt(2/pi) (x + 0.044715 x^3).
inline double gelu_z(double x) {
  const double c = std::sqrt(2.0 / M_PI);
  return 2 * c * (x + 0.044715 * x * x * x);
}
// 0.5 x (1 + tanh(u)) = x / (1 + e^-2u): the same function, without the cancellation of
// 1 + tanh(u) at negative x.
inline double gelu_ref(double x) { return x / (1 + std::exp(-gelu_z(x))); }

// gelu'(x) = sigma + x sigma (1 - sigma) dz/dx, and the magnitude of its two terms: where they
// cancel (gelu' = 0 at x = -0.75179) no float evaluation can be relatively accurate, so the budget
// there is 1e-6 of that magnitude.
inline double gelu_grad_ref(double x, double* magnitude) {
  const double c = std::sqrt(2.0 / M_PI);
  const double e = std::exp(-gelu_z(x));
  const double sigma = 1 / (1 + e), om = 1 / (1 + 1 / e);  // om = 1 - sigma
  const double second = sigma * om * x * 2 * c * (1 + 3 * 0.044715 * x * x);
  *magnitude = sigma + std::fabs(second);
  return sigma + second;
}

}  // namespace pl::test
