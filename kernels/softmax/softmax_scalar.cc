// SPDX-License-Identifier: Apache-2.0
// softmax_rows.scalar, softmax_rows_bwd.scalar: the references, in double, rounded once.
#include <algorithm>
#include <cmath>
#include <limits>

#include "phaselab/kernels.hpp"

namespace pl::scalar {

// x, y: rows x cols. Row r uses columns c < n(r), n(r) = min(r + 1, cols) if causal else cols;
// the others are written as 0.
void SoftmaxRows(const float* x, float* y, size_t rows, size_t cols, float scale, int causal) {
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    const size_t n = causal ? std::min(r + 1, cols) : cols;
    double m = -std::numeric_limits<double>::infinity();
    for (size_t c = 0; c < n; ++c) m = std::max(m, double(scale) * xr[c]);
    double sum = 0;
    for (size_t c = 0; c < n; ++c) sum += std::exp(double(scale) * xr[c] - m);
    // Second exp pass instead of a buffer: x may alias y.
    for (size_t c = 0; c < n; ++c) yr[c] = float(std::exp(double(scale) * xr[c] - m) / sum);
    for (size_t c = n; c < cols; ++c) yr[c] = 0.f;
  }
}

// y, dy, dx: rows x cols. dx = scale * y .* (dy - sum_c dy[c] y[c]) per row; masked entries 0.
void SoftmaxRowsBwd(const float* y, const float* dy, float* dx, size_t rows, size_t cols,
                    float scale, int causal) {
  for (size_t r = 0; r < rows; ++r) {
    const float* yr = y + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    const size_t n = causal ? std::min(r + 1, cols) : cols;
    double s = 0;
    for (size_t c = 0; c < n; ++c) s += double(dyr[c]) * yr[c];
    for (size_t c = 0; c < n; ++c) dxr[c] = float(double(scale) * yr[c] * (double(dyr[c]) - s));
    for (size_t c = n; c < cols; ++c) dxr[c] = 0.f;
  }
}

}  // namespace pl::scalar
