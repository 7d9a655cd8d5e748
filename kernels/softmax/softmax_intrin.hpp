// SPDX-License-Identifier: Apache-2.0
// Shared by the intrinsics variants of softmax_rows and attention (same ISA, same namespace).
#pragma once

#include <cstddef>

#include "kernels/common/intrin_ops.hpp"

namespace pl::PL_INTRIN_NS {

// y[0:len) = softmax(scale * x[0:len)); x may alias y.
void softmax_row(const float* x, float* y, size_t len, float scale);

}  // namespace pl::PL_INTRIN_NS
