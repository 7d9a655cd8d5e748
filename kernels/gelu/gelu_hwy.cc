// SPDX-License-Identifier: Apache-2.0
// gelu.hwy.<isa>, gelu_bwd.hwy.<isa>, gelu_fwd_grad.hwy.<isa>: GELU (tanh form) as x sigma(z),
// z = 2u, every target.
//
// Accuracy (budget: 1e-6 relative per element). y = x sigma(z) has relative condition |z| with
// respect to z, and |z| reaches 88 before y leaves the normal range, so z is formed as a float
// pair (z_hi, z_lo) with FMA error terms (C1 x + C3 x^3, both constants split in two) and
// e^(-z) = Exp(-z_hi) (1 - z_lo). Rounding z to float alone would cost up to 88 * 6e-8 = 5e-6.
// On x86, 1 / (1 + e) is the approximate reciprocal (rcp14 / rcpps, >= 11 bits) refined by one
// Newton step (>= 22 bits, about 3 ULP at worst) instead of a division (vdivps is the slowest
// instruction of the loop); other targets divide.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gelu/gelu_hwy.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
// clang-format off
#include <hwy/contrib/math/math-inl.h>
#include "phaselab/hwy_part-inl.h"
// clang-format on

#ifndef PHASELAB_GELU_CONSTANTS_
#define PHASELAB_GELU_CONSTANTS_
namespace pl::gelu_detail {
constexpr double kC1 = 1.5957691216057307117;  // 2 sqrt(2/pi)
constexpr double kC3 = kC1 * 0.044715;         // 2 sqrt(2/pi) 0.044715
constexpr float kC1Hi = static_cast<float>(kC1), kC1Lo = static_cast<float>(kC1 - kC1Hi);
constexpr float kC3Hi = static_cast<float>(kC3), kC3Lo = static_cast<float>(kC3 - kC3Hi);
}  // namespace pl::gelu_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace pl {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

namespace {

// For x (any float): xc = clamp(x, -20, 20), sigma = sigma(z(xc)) and 1 - sigma, both to a few
// ULP. Beyond |x| = 20 sigma is exactly 0 or 1 in float; clamping keeps every intermediate finite.
template <class D, class V = hn::Vec<D>>
HWY_INLINE void Sigmoid(D d, V x, V& xc, V& sigma, V& one_minus_sigma) {
  using namespace gelu_detail;
  xc = hn::Min(hn::Max(x, hn::Set(d, -20.f)), hn::Set(d, 20.f));
  // x^3 = x3 + x3_lo, C1 x = t1 + t1_lo, C3 x^3 = t3 + t3_lo (error terms from FMA).
  const V x2 = hn::Mul(xc, xc);
  const V x2_lo = hn::MulSub(xc, xc, x2);
  const V x3 = hn::Mul(x2, xc);
  const V x3_lo = hn::MulAdd(x2_lo, xc, hn::MulSub(x2, xc, x3));
  const V c1 = hn::Set(d, kC1Hi), c3 = hn::Set(d, kC3Hi);
  const V t1 = hn::Mul(c1, xc);
  const V t1_lo = hn::MulAdd(hn::Set(d, kC1Lo), xc, hn::MulSub(c1, xc, t1));
  const V t3 = hn::Mul(c3, x3);
  const V t3_lo = hn::MulAdd(hn::Set(d, kC3Lo), x3, hn::MulAdd(c3, x3_lo, hn::MulSub(c3, x3, t3)));
  // TwoSum: t1 + t3 = z_hi + err exactly.
  const V z_hi = hn::Add(t1, t3);
  const V b = hn::Sub(z_hi, t1);
  const V err = hn::Add(hn::Sub(t1, hn::Sub(z_hi, b)), hn::Sub(t3, b));
  const V z_lo = hn::Add(err, hn::Add(t1_lo, t3_lo));
  const V one = hn::Set(d, 1.f);
#if HWY_ARCH_X86
  // e = e^(-z); above 88.7 Exp gives inf (kept inside its valid range, <= 104), and there sigma
  // is set to 0 (the Newton step would give inf * 0).
  const V e0 = hn::Exp(d, hn::Min(hn::Neg(z_hi), hn::Set(d, 100.f)));
  // e^(-z_hi) (1 - z_lo); 1 + e as one explicit FMA, so that no compiler contraction depends on
  // whether e is used again (1 - sigma): gelu and gelu_fwd_grad then round identically.
  const V e = hn::Mul(e0, hn::Sub(one, z_lo));
  const V a = hn::MulAdd(e0, hn::Sub(one, z_lo), one);
  const V r0 = hn::ApproximateReciprocal(a);
  sigma = hn::IfThenZeroElse(hn::IsInf(a), hn::MulAdd(r0, hn::NegMulAdd(a, r0, one), r0));
#else
  // e = e^(-z); above 88.7 Exp gives inf (kept inside its valid range, <= 104), so sigma = 0.
  const V e0 = hn::Exp(d, hn::Min(hn::Neg(z_hi), hn::Set(d, 100.f)));
  // e^(-z_hi) (1 - z_lo); inf stays inf. 1 + e as one explicit FMA, as above (GCC contracts
  // e + 1 into an FMA where e has no other use, in gelu but not in gelu_fwd_grad: their bits
  // differed on NEON).
  const V e = hn::Mul(e0, hn::Sub(one, z_lo));
  sigma = hn::Div(one, hn::MulAdd(e0, hn::Sub(one, z_lo), one));
#endif
  // 1 - sigma: by subtraction where that is exact enough (sigma < 1/2), else e sigma (never
  // inf * 0 there since e <= 1).
  one_minus_sigma =
      hn::IfThenElse(hn::Lt(sigma, hn::Set(d, 0.5f)), hn::Sub(one, sigma), hn::Mul(e, sigma));
}

template <class D, class V = hn::Vec<D>>
HWY_INLINE V GeluV(D d, V x) {
  V xc, sigma, om;
  Sigmoid(d, x, xc, sigma, om);
  return hn::Mul(x, sigma);
}

// gelu'(x) = sigma + x sigma (1 - sigma) dz/dx, dz/dx = C1 + 3 C3 x^2.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V GeluGradV(D d, V x) {
  using namespace gelu_detail;
  V xc, sigma, om;
  Sigmoid(d, x, xc, sigma, om);
  const V dz = hn::MulAdd(hn::Set(d, float(3 * kC3)), hn::Mul(xc, xc), hn::Set(d, kC1Hi));
  return hn::Mul(sigma, hn::MulAdd(hn::Mul(om, xc), dz, hn::Set(d, 1.f)));
}

// gelu(x) and gelu'(x) from one sigmoid.
template <class D, class V = hn::Vec<D>>
HWY_INLINE void GeluAndGradV(D d, V x, V& y, V& dydx) {
  using namespace gelu_detail;
  V xc, sigma, om;
  Sigmoid(d, x, xc, sigma, om);
  y = hn::Mul(x, sigma);
  const V dz = hn::MulAdd(hn::Set(d, float(3 * kC3)), hn::Mul(xc, xc), hn::Set(d, kC1Hi));
  dydx = hn::Mul(sigma, hn::MulAdd(hn::Mul(om, xc), dz, hn::Set(d, 1.f)));
}

}  // namespace

// x, y: n
void Gelu(const float* x, float* y, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(GeluV(d, hn::LoadU(d, x + i)), d, y + i);
  if (i < n) {
    part::Store(d, GeluV(d, part::Load(d, x + i, n - i)), y + i, n - i);
  }
}

// x, dy, dx: n. dx = dy gelu'(x).
void GeluBwd(const float* x, const float* dy, float* dx, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= n; i += N)
    hn::StoreU(hn::Mul(hn::LoadU(d, dy + i), GeluGradV(d, hn::LoadU(d, x + i))), d, dx + i);
  if (i < n) {
    const size_t r = n - i;
    part::Store(d, hn::Mul(part::Load(d, dy + i, r), GeluGradV(d, part::Load(d, x + i, r))), dx + i,
                r);
  }
}

// x, y, dydx: n. y = gelu(x), dydx = gelu'(x); x may alias y or dydx.
void GeluFwdGrad(const float* x, float* y, float* dydx, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  hn::Vec<decltype(d)> yv, gv;
  size_t i = 0;
  for (; i + N <= n; i += N) {
    GeluAndGradV(d, hn::LoadU(d, x + i), yv, gv);
    hn::StoreU(yv, d, y + i);
    hn::StoreU(gv, d, dydx + i);
  }
  if (i < n) {
    const size_t r = n - i;
    GeluAndGradV(d, part::Load(d, x + i, r), yv, gv);
    part::Store(d, yv, y + i, r);
    part::Store(d, gv, dydx + i, r);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();
