// SPDX-License-Identifier: Apache-2.0
// Per-target helpers: sums of float vectors accumulated in double. Widening a float to double is
// exact, and so is the double product of two widened floats (24 + 24 bits < 53), so a row sum
// computed this way is as accurate as the scalar reference's double loop up to summation order.
// Include from a Highway per-target source (after hwy/highway.h), inside no namespace.
#if defined(PHASELAB_HWY_WIDE_SUM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PHASELAB_HWY_WIDE_SUM_INL_H_
#undef PHASELAB_HWY_WIDE_SUM_INL_H_
#else
#define PHASELAB_HWY_WIDE_SUM_INL_H_
#endif

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace pl {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// A double accumulator pair (lo, hi) for a float vector: lo takes the lower half of the lanes,
// hi the upper half. Free functions, not a struct: SVE vectors cannot be class members.
// Start with lo = hi = Zero(Repartition<double, DF>()).

// (lo, hi) += v, every lane exactly widened
template <class DF, class VD>
HWY_INLINE void WideAdd(DF df, hn::Vec<DF> v, VD& lo, VD& hi) {
  const hn::Repartition<double, DF> dd;
#if HWY_TARGET == HWY_SCALAR
  (void)df;
  (void)hi;
  lo = hn::Add(lo, hn::PromoteTo(dd, v));
#else
  const hn::Half<DF> dh;
  (void)df;
  lo = hn::Add(lo, hn::PromoteTo(dd, hn::LowerHalf(dh, v)));
  hi = hn::Add(hi, hn::PromoteTo(dd, hn::UpperHalf(dh, v)));
#endif
}

// (lo, hi) += a .* b, the products formed exactly in double
template <class DF, class VD>
HWY_INLINE void WideAddProduct(DF df, hn::Vec<DF> a, hn::Vec<DF> b, VD& lo, VD& hi) {
  const hn::Repartition<double, DF> dd;
#if HWY_TARGET == HWY_SCALAR
  (void)df;
  (void)hi;
  lo = hn::MulAdd(hn::PromoteTo(dd, a), hn::PromoteTo(dd, b), lo);
#else
  const hn::Half<DF> dh;
  (void)df;
  lo = hn::MulAdd(hn::PromoteTo(dd, hn::LowerHalf(dh, a)), hn::PromoteTo(dd, hn::LowerHalf(dh, b)),
                  lo);
  hi = hn::MulAdd(hn::PromoteTo(dd, hn::UpperHalf(dh, a)), hn::PromoteTo(dd, hn::UpperHalf(dh, b)),
                  hi);
#endif
}

// The sum of every lane of the pair.
template <class DD, class VD>
HWY_INLINE double WideTotal(DD dd, VD lo, VD hi) {
  return hn::GetLane(hn::SumOfLanes(dd, hn::Add(lo, hi)));
}

}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();

#endif  // PHASELAB_HWY_WIDE_SUM_INL_H_
