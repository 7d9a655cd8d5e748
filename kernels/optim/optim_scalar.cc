// SPDX-License-Identifier: Apache-2.0
// adam.scalar, adamw.scalar, sgld.scalar: the references, each element updated in double and
// rounded once when stored.
#include <cmath>

#include "kernels/random/philox.hpp"
#include "phaselab/kernels.hpp"

namespace pl::scalar {

namespace {

// Bias corrections 1 - beta^step of the first and second moments (step is 1-based).
double bias_correction(float beta, int64_t step) {
  return 1.0 - std::pow(static_cast<double>(beta), static_cast<double>(step));
}

}  // namespace

// param, grad, m, v: n.
//   g = grad + wd param;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   param -= lr mhat / (sqrt(vhat) + eps),  mhat = m / (1 - b1^t), vhat = v / (1 - b2^t)
void Adam(float* param, const float* grad, float* m, float* v, size_t n, float lr, float beta1,
          float beta2, float eps, float weight_decay, int64_t step) {
  const double b1 = beta1, b2 = beta2, c1 = bias_correction(beta1, step),
               c2 = bias_correction(beta2, step);
  for (size_t i = 0; i < n; ++i) {
    const double p = param[i];
    const double g = grad[i] + double{weight_decay} * p;
    const double mi = b1 * m[i] + (1 - b1) * g;
    const double vi = b2 * v[i] + (1 - b2) * g * g;
    m[i] = static_cast<float>(mi);
    v[i] = static_cast<float>(vi);
    param[i] = static_cast<float>(p - double{lr} * (mi / c1) / (std::sqrt(vi / c2) + eps));
  }
}

// param, grad, m, v: n. As Adam with g = grad, and the decay decoupled from the moments:
//   param -= lr (mhat / (sqrt(vhat) + eps) + wd param)
void Adamw(float* param, const float* grad, float* m, float* v, size_t n, float lr, float beta1,
           float beta2, float eps, float weight_decay, int64_t step) {
  const double b1 = beta1, b2 = beta2, c1 = bias_correction(beta1, step),
               c2 = bias_correction(beta2, step);
  for (size_t i = 0; i < n; ++i) {
    const double p = param[i];
    const double g = grad[i];
    const double mi = b1 * m[i] + (1 - b1) * g;
    const double vi = b2 * v[i] + (1 - b2) * g * g;
    m[i] = static_cast<float>(mi);
    v[i] = static_cast<float>(vi);
    param[i] = static_cast<float>(
        p - double{lr} * ((mi / c1) / (std::sqrt(vi / c2) + eps) + double{weight_decay} * p));
  }
}

// theta, grad: n.  theta += -eta grad + sqrt(2 eta T) xi_i, xi_i = the float that
// gaussian.scalar writes for sample counter + i of (seed, stream).
void Sgld(float* theta, const float* grad, size_t n, float eta, float temperature, uint64_t seed,
          uint64_t stream, uint64_t counter) {
  const double noise_scale = std::sqrt(2.0 * eta * temperature);
  philox::for_each_sample(
      n, seed, stream, counter, [&](size_t i, const philox::Block& b, unsigned lane) {
        const double xi = static_cast<float>(philox::gaussian_of(b, lane));
        theta[i] = static_cast<float>(double{theta[i]} - double{eta} * grad[i] + noise_scale * xi);
      });
}

}  // namespace pl::scalar
