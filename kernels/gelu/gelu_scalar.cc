// SPDX-License-Identifier: Apache-2.0
// gelu.scalar, gelu_bwd.scalar, gelu_fwd_grad.scalar: the references, in double, rounded once.
//
// GELU (tanh form): y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3). Written with the
// identity 0.5 (1 + tanh(u)) = 1 / (1 + e^(-2u)) = sigma(2u), which has no cancellation for
// x < 0 (1 + tanh(u) loses every digit once tanh(u) rounds to -1, near x = -9 even in double).
#include <cmath>

#include "phaselab/kernels.hpp"

namespace pl::scalar {
namespace {

constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kCubic = 0.044715;

// gelu(x) and gelu'(x) in double.
double gelu(double x) {
  const double z = 2 * kSqrt2OverPi * (x + kCubic * x * x * x);  // z = 2u
  return x / (1 + std::exp(-z));                                 // x sigma(z)
}

double gelu_grad(double x) {
  const double z = 2 * kSqrt2OverPi * (x + kCubic * x * x * x);
  const double dz = 2 * kSqrt2OverPi * (1 + 3 * kCubic * x * x);  // dz/dx
  const double e = std::exp(-z);
  const double sigma = 1 / (1 + e);
  const double one_minus_sigma = 1 / (1 + 1 / e);  // = e / (1 + e), finite when e = inf
  // d/dx [x sigma(z)] = sigma + x sigma (1 - sigma) dz/dx
  return sigma * (1 + one_minus_sigma * x * dz);
}

}  // namespace

// x, y: n
void Gelu(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = static_cast<float>(gelu(x[i]));
}

// x, dy, dx: n
void GeluBwd(const float* x, const float* dy, float* dx, size_t n) {
  for (size_t i = 0; i < n; ++i) dx[i] = static_cast<float>(double(dy[i]) * gelu_grad(x[i]));
}

// x, y, dydx: n (x may alias y or dydx)
void GeluFwdGrad(const float* x, float* y, float* dydx, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const double v = x[i];
    y[i] = static_cast<float>(gelu(v));
    dydx[i] = static_cast<float>(gelu_grad(v));
  }
}

}  // namespace pl::scalar
