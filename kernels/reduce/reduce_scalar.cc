// SPDX-License-Identifier: Apache-2.0
// sum.scalar, dot.scalar, max.scalar: the references of the fixed order (fixed_order.hpp), with
// double accumulators. Products of two floats are exact in double, so dot's terms are exact.
#include <limits>

#include "kernels/reduce/fixed_order.hpp"
#include "phaselab/kernels.hpp"

namespace pl::scalar {

// x: n
double Sum(const float* x, size_t n) {
  double acc[reduce::kAccumulators] = {};
  for (size_t i = 0; i < n; ++i) acc[i % reduce::kAccumulators] += double{x[i]};
  return reduce::fold_sum(acc);
}

// x, y: n
double Dot(const float* x, const float* y, size_t n) {
  double acc[reduce::kAccumulators] = {};
  for (size_t i = 0; i < n; ++i) acc[i % reduce::kAccumulators] += double{x[i]} * double{y[i]};
  return reduce::fold_sum(acc);
}

// x: n; NaN if any element is NaN, -inf if n == 0.
float Max(const float* x, size_t n) {
  float acc[reduce::kAccumulators];
  for (float& a : acc) a = -std::numeric_limits<float>::infinity();
  bool nan = false;
  for (size_t i = 0; i < n; ++i) {
    nan |= std::isnan(x[i]);
    acc[i % reduce::kAccumulators] = reduce::max_step(acc[i % reduce::kAccumulators], x[i]);
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : reduce::fold_max(acc);
}

}  // namespace pl::scalar
