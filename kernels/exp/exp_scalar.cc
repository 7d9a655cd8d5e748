// SPDX-License-Identifier: Apache-2.0
// exp.scalar: the reference, computed in double and rounded once.
#include <cmath>

#include "phaselab/kernels.hpp"

namespace pl::scalar {

// x, y: n
void Exp(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = static_cast<float>(std::exp(static_cast<double>(x[i])));
}

}  // namespace pl::scalar
