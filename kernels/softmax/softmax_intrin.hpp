// SPDX-License-Identifier: Apache-2.0
// The rows the intrinsics softmax family lends attention.intrin (same ISA, same namespace): the
// fast policy of kernels/softmax/softmax_row-inl.h (exp of intrin_ops.hpp, float row sum) for
// attention's budget; softmax_rows keeps its accurate row to itself (softmax_intrin.cc).
#pragma once

#include <cstddef>

#include "kernels/common/intrin_ops.hpp"

namespace pl::PL_INTRIN_NS {

// x[0:len) = softmax(x[0:len)) in place (the scale is already in x), stable.
void softmax_row_fast(float* x, size_t len);
// ds[0:len) = scale * p .* (ds - <p, ds>) (softmax backward; ds holds dP on entry).
void softmax_bwd_row_fast(const float* p, float* ds, size_t len, float scale);

}  // namespace pl::PL_INTRIN_NS
