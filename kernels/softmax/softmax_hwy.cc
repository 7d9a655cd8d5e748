// SPDX-License-Identifier: Apache-2.0
// softmax_rows.hwy.<isa>, softmax_rows_bwd.hwy.<isa>: the rows of softmax_row-inl.h under its
// accurate policy (budget 1e-6 relative per element; the header says how it is met), every target
// from one source.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/softmax/softmax_hwy.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/softmax/softmax_row-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pl {
namespace HWY_NAMESPACE {

// x, y: rows x cols; row r uses its first n(r) = (causal ? min(r + 1, cols) : cols) columns.
void SoftmaxRows(const float* x, float* y, size_t rows, size_t cols, float scale, int causal) {
  softmax::Rows<softmax::Accuracy::kAccurate>(x, y, rows, cols, scale, causal);
}

// y, dy, dx: rows x cols. dx = scale * y .* (dy - s), s = sum_c dy[c] y[c]; masked entries 0.
void SoftmaxRowsBwd(const float* y, const float* dy, float* dx, size_t rows, size_t cols,
                    float scale, int causal) {
  softmax::RowsBwd<softmax::Accuracy::kAccurate>(y, dy, dx, rows, cols, scale, causal);
}

}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();
