// SPDX-License-Identifier: Apache-2.0
// The fixed summation order of the reductions (kernels.def): element i goes to accumulator
// i mod 16, and the 16 accumulators are folded as a halving tree (j + 8, j + 4, j + 2, j + 1).
// Scalar and vector variants share this fold, so their results are bit-identical.
#pragma once

#include <cmath>
#include <cstddef>

namespace pl::reduce {

constexpr size_t kAccumulators = 16;

// acc: 16; returns ((acc[0] + acc[8]) + (acc[4] + acc[12])) + ... as a halving tree.
inline double fold_sum(double* acc) {
  for (size_t w = kAccumulators / 2; w >= 1; w /= 2)
    for (size_t j = 0; j < w; ++j) acc[j] += acc[j + w];
  return acc[0];
}

// The max step: keeps a unless b is strictly larger (NaN never enters; it is tracked apart).
inline float max_step(float a, float b) { return b > a ? b : a; }

// acc: 16, the same halving tree with max_step.
inline float fold_max(float* acc) {
  for (size_t w = kAccumulators / 2; w >= 1; w /= 2)
    for (size_t j = 0; j < w; ++j) acc[j] = max_step(acc[j], acc[j + w]);
  return acc[0];
}

}  // namespace pl::reduce
