// exp.hwy.<isa>: Highway's Exp (Cody-Waite reduction + polynomial, <= 1 ULP), all targets.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/exp/exp_hwy.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>
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
  for (; i + N <= n; i += N) hn::StoreU(hn::Exp(d, hn::LoadU(d, x + i)), d, y + i);
  if (i < n) {
    part::Store(d, hn::Exp(d, part::Load(d, x + i, n - i)), y + i, n - i);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();
