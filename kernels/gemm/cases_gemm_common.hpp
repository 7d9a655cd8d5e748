// SPDX-License-Identifier: Apache-2.0
// What the harness cases of gemm and gemm_epilogue share: the sentinel in C's padding between rows
// (a kernel must leave it alone) and the tolerance of a depth-k float sum against the double
// reference.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace pl::test::gemm_cases {

constexpr float kPad = -7.25f;  // C's padding between rows must keep it

inline double tol_for(size_t k) { return 1e-5 * std::sqrt(double(std::max<size_t>(k, 1))); }

}  // namespace pl::test::gemm_cases
