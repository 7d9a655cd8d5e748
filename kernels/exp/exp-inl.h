// SPDX-License-Identifier: Apache-2.0
// Highway e^x shared by exp_hwy.cc and kernels/softmax/softmax_row-inl.h (attention's fast row
// softmax): one copy per Highway target (per-target include guard, the "-inl.h" convention of
// Highway). <= 2 ULP against double exp where the result is a normal float; the reduction and
// polynomial are exp_poly.inc's, shared with exp_vec of kernels/common/xsimd_arch.hpp and exp of
// kernels/common/intrin_ops.hpp.
//
// Why not hn::Exp: it rounds with a float -> int32 conversion (Highway fixes up the overflow
// lanes of cvttps2dq: several extra operations per vector), converts back, and scales with two
// multiplies and a range blend. Here n = round(x / ln 2) comes from the 1.5 * 2^23 shifter, whose
// low mantissa bits already hold n, so 2^n is added to the exponent field with one integer add.
// That is exact only where e^x is a normal float, so the fast path needs every lane of the vector
// in [-87, 88]; other vectors (rare: exp is ~0 or ~inf there) take the clamped two-factor scaling,
// which gives bit-identical results on the in-range lanes (scaling by 2^n is exact either way),
// so an element's result never depends on its neighbours.
#if defined(PHASELAB_KERNELS_EXP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PHASELAB_KERNELS_EXP_INL_H_
#undef PHASELAB_KERNELS_EXP_INL_H_
#else
#define PHASELAB_KERNELS_EXP_INL_H_
#endif

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace pl {
namespace HWY_NAMESPACE {
namespace exp_detail {
namespace hn = hwy::HWY_NAMESPACE;

// The backend operations of exp_poly.inc: one d per call site.
template <class D>
struct Ops {
  D d;
  using V = hn::Vec<D>;
  HWY_INLINE V set(float c) const { return hn::Set(d, c); }
  HWY_INLINE V fma(V a, V b, V c) const { return hn::MulAdd(a, b, c); }
  HWY_INLINE V fnma(V a, V b, V c) const { return hn::NegMulAdd(a, b, c); }
  HWY_INLINE V mul(V a, V b) const { return hn::Mul(a, b); }
  HWY_INLINE V add(V a, V b) const { return hn::Add(a, b); }
  HWY_INLINE V sub(V a, V b) const { return hn::Sub(a, b); }
};

#define PL_EXP_INLINE HWY_INLINE
#include "kernels/exp/exp_poly.inc"
#undef PL_EXP_INLINE

template <class D, class V = hn::Vec<D>>
HWY_INLINE V ExpReduced(D d, V x, V t) {
  return exp_reduced(Ops<D>{d}, x, t);
}

template <class D, class V = hn::Vec<D>>
HWY_INLINE V Shifted(D d, V x) {
  return exp_shift(Ops<D>{d}, x);
}

// Any input: clamped to [-104, 89] (beyond, e^x is 0 / inf in float), 2^n applied as two
// factors 2^(n/2) 2^(n - n/2) so results near overflow and in the subnormal range come out right.
// Inline, not a call: a call would make the callers' loops spill their live vectors around it.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V ExpAnyRange(D d, V x) {
  const hn::RebindToSigned<D> di;
  x = hn::Min(hn::Max(x, hn::Set(d, kExpMin)), hn::Set(d, kExpMax));
  const V t = Shifted(d, x);
  const V e = ExpReduced(d, x, t);
  // The low bits of t hold n (two's complement) as long as |n| < 2^22.
  const auto ni = hn::Sub(hn::BitCast(di, t), hn::BitCast(di, hn::Set(d, kExpShifter)));
  const auto n1 = hn::ShiftRight<1>(ni);  // arithmetic shift: floor(n / 2)
  const auto n2 = hn::Sub(ni, n1);
  const auto bias = hn::Set(di, 127);
  const V s1 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(n1, bias)));
  const V s2 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(n2, bias)));
  return hn::Mul(hn::Mul(e, s1), s2);
}

// e^x. Fast path: every lane in [-87, 88], where n is in [-126, 127] and e^r 2^n is normal
// (n = -126 only for x in [-87, -86.99], where r >= 0.33 and e^r >= 1.39), so adding n << 23 to
// the bits of e^r is the exact product. bits(t) << 23 == n << 23 (mod 2^32): the shifter's own
// mantissa bit 2^22 and its exponent leave through the top. NaN lanes fail the range test.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V ExpVec(D d, V x) {
  const hn::RebindToSigned<D> di;
  const auto in = hn::And(hn::Ge(x, hn::Set(d, kExpFastMin)), hn::Le(x, hn::Set(d, kExpFastMax)));
  if (HWY_UNLIKELY(!hn::AllTrue(d, in))) return ExpAnyRange(d, x);
  const V t = Shifted(d, x);
  const V e = ExpReduced(d, x, t);
  return hn::BitCast(d, hn::Add(hn::BitCast(di, e), hn::ShiftLeft<23>(hn::BitCast(di, t))));
}

}  // namespace exp_detail
}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();

#endif  // PHASELAB_KERNELS_EXP_INL_H_
