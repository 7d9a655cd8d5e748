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

// Two double accumulators holding the lower and upper halves of a float vector's lanes.
template <class DF>
struct WideSum {
  using DD = hn::Repartition<double, DF>;
  using VD = hn::Vec<DD>;
  using VF = hn::Vec<DF>;
  DD dd;
  VD lo, hi;

  HWY_INLINE HWY_ATTR WideSum() : lo(hn::Zero(DD())), hi(hn::Zero(DD())) {}

  // acc += v (every lane, exactly widened)
  HWY_INLINE void Add(VF v) {
#if HWY_TARGET == HWY_SCALAR
    lo = hn::Add(lo, hn::PromoteTo(dd, v));
#else
    const hn::Half<DF> dh;
    lo = hn::Add(lo, hn::PromoteTo(dd, hn::LowerHalf(dh, v)));
    hi = hn::Add(hi, hn::PromoteTo(dd, hn::UpperHalf(dh, v)));
#endif
  }
  // acc += a .* b, the products formed exactly in double
  HWY_INLINE void AddProduct(VF a, VF b) {
#if HWY_TARGET == HWY_SCALAR
    lo = hn::MulAdd(hn::PromoteTo(dd, a), hn::PromoteTo(dd, b), lo);
#else
    const hn::Half<DF> dh;
    lo = hn::MulAdd(hn::PromoteTo(dd, hn::LowerHalf(dh, a)), hn::PromoteTo(dd, hn::LowerHalf(dh, b)),
                    lo);
    hi = hn::MulAdd(hn::PromoteTo(dd, hn::UpperHalf(dh, a)), hn::PromoteTo(dd, hn::UpperHalf(dh, b)),
                    hi);
#endif
  }
  HWY_INLINE double Total() const { return hn::GetLane(hn::SumOfLanes(dd, hn::Add(lo, hi))); }
};

}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();

#endif  // PHASELAB_HWY_WIDE_SUM_INL_H_
