// SPDX-License-Identifier: Apache-2.0
// exp.hwy.<isa>: exp_detail::ExpVec of kernels/exp/exp-inl.h (Cody-Waite reduction + Cephes
// polynomial, shifter rounding and an exponent-field add on a range-checked fast path), all
// targets.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/exp/exp_hwy.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/exp/exp-inl.h"
#include "phaselab/hwy_part-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pl {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// x, y: n. The tail is a partial vector, so every element sees the same arithmetic.
void Exp(const float* x, float* y, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(exp_detail::ExpVec(d, hn::LoadU(d, x + i)), d, y + i);
  if (i < n) {
    part::Store(d, exp_detail::ExpVec(d, part::Load(d, x + i, n - i)), y + i, n - i);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();
