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
// Speed: one vector's sigmoid is a chain of ~70 dependent operations, so the main loops of the
// fixed-width targets take 4 vectors per iteration (2 on AVX2, 16 registers) and run each step of
// the sigmoid on all of them in turn; the operations per element are those of one vector, so the
// results do not depend on where a vector falls (block, single vector or tail).
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

// The sigmoid in three steps, so that the unrolled loops below can run each step on several
// vectors in turn (their dependency chains then overlap) with the same operations per element.
// Step 1: xc = clamp(x, -20, 20) and z(xc) as the float pair z_hi + z_lo. Beyond |x| = 20 sigma is
// exactly 0 or 1 in float; clamping keeps every intermediate finite.
template <class D, class V = hn::Vec<D>>
HWY_INLINE void ZPair(D d, V x, V& xc, V& z_hi, V& z_lo) {
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
  z_hi = hn::Add(t1, t3);
  const V b = hn::Sub(z_hi, t1);
  const V err = hn::Add(hn::Sub(t1, hn::Sub(z_hi, b)), hn::Sub(t3, b));
  z_lo = hn::Add(err, hn::Add(t1_lo, t3_lo));
}

// Step 2: e^(-z_hi); above 88.7 Exp gives inf (kept inside its valid range, <= 104).
template <class D, class V = hn::Vec<D>>
HWY_INLINE V ExpNegZ(D d, V z_hi) {
  return hn::Exp(d, hn::Min(hn::Neg(z_hi), hn::Set(d, 100.f)));
}

// Step 3: sigma = sigma(z) and 1 - sigma, both to a few ULP, from e0 = e^(-z_hi) and z_lo.
template <class D, class V = hn::Vec<D>>
HWY_INLINE void SigmaFromExp(D d, V e0, V z_lo, V& sigma, V& one_minus_sigma) {
  const V one = hn::Set(d, 1.f);
#if HWY_ARCH_X86
  // e = e^(-z_hi) (1 - z_lo); where e0 is inf, sigma is set to 0 (the Newton step would give
  // inf * 0). 1 + e as one explicit FMA, so that no compiler contraction depends on whether e
  // is used again (1 - sigma): gelu and gelu_fwd_grad then round identically.
  const V e = hn::Mul(e0, hn::Sub(one, z_lo));
  const V a = hn::MulAdd(e0, hn::Sub(one, z_lo), one);
  const V r0 = hn::ApproximateReciprocal(a);
  sigma = hn::IfThenZeroElse(hn::IsInf(a), hn::MulAdd(r0, hn::NegMulAdd(a, r0, one), r0));
#else
  // e = e^(-z_hi) (1 - z_lo); inf stays inf, so sigma = 0. 1 + e as one explicit FMA, as above
  // (GCC contracts e + 1 into an FMA where e has no other use, in gelu but not in gelu_fwd_grad:
  // their bits differed on NEON).
  const V e = hn::Mul(e0, hn::Sub(one, z_lo));
  sigma = hn::Div(one, hn::MulAdd(e0, hn::Sub(one, z_lo), one));
#endif
  // 1 - sigma: by subtraction where that is exact enough (sigma < 1/2), else e sigma (never
  // inf * 0 there since e <= 1).
  one_minus_sigma =
      hn::IfThenElse(hn::Lt(sigma, hn::Set(d, 0.5f)), hn::Sub(one, sigma), hn::Mul(e, sigma));
}

// For x (any float): xc = clamp(x, -20, 20), sigma = sigma(z(xc)) and 1 - sigma.
template <class D, class V = hn::Vec<D>>
HWY_INLINE void Sigmoid(D d, V x, V& xc, V& sigma, V& one_minus_sigma) {
  V z_hi, z_lo;
  ZPair(d, x, xc, z_hi, z_lo);
  SigmaFromExp(d, ExpNegZ(d, z_hi), z_lo, sigma, one_minus_sigma);
}

// gelu'(x) = sigma + x sigma (1 - sigma) dz/dx, dz/dx = C1 + 3 C3 x^2, at xc.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V GradFromSigma(D d, V xc, V sigma, V om) {
  using namespace gelu_detail;
  const V dz = hn::MulAdd(hn::Set(d, float(3 * kC3)), hn::Mul(xc, xc), hn::Set(d, kC1Hi));
  return hn::Mul(sigma, hn::MulAdd(hn::Mul(om, xc), dz, hn::Set(d, 1.f)));
}

template <class D, class V = hn::Vec<D>>
HWY_INLINE V GeluV(D d, V x) {
  V xc, sigma, om;
  Sigmoid(d, x, xc, sigma, om);
  return hn::Mul(x, sigma);
}

template <class D, class V = hn::Vec<D>>
HWY_INLINE V GeluGradV(D d, V x) {
  V xc, sigma, om;
  Sigmoid(d, x, xc, sigma, om);
  return GradFromSigma(d, xc, sigma, om);
}

// gelu(x) and gelu'(x) from one sigmoid.
template <class D, class V = hn::Vec<D>>
HWY_INLINE void GeluAndGradV(D d, V x, V& y, V& dydx) {
  V xc, sigma, om;
  Sigmoid(d, x, xc, sigma, om);
  y = hn::Mul(x, sigma);
  dydx = GradFromSigma(d, xc, sigma, om);
}

#if !HWY_HAVE_SCALABLE
// Vectors per iteration of the unrolled loops: one sigmoid is a chain of ~70 operations, several
// chains side by side keep the FMA units busy. x86 AVX2 has 16 vector registers, the others 32.
constexpr size_t kUnroll = HWY_ARCH_X86 && HWY_MAX_BYTES <= 32 ? 2 : 4;

// Sigmoid of x[0..K), each step on all K vectors in turn.
template <size_t K, class D, class V = hn::Vec<D>>
HWY_INLINE void SigmoidK(D d, const V* x, V* xc, V* sigma, V* om) {
  V z_hi[K], z_lo[K], e0[K];
  for (size_t k = 0; k < K; ++k) ZPair(d, x[k], xc[k], z_hi[k], z_lo[k]);
  for (size_t k = 0; k < K; ++k) e0[k] = ExpNegZ(d, z_hi[k]);
  for (size_t k = 0; k < K; ++k) SigmaFromExp(d, e0[k], z_lo[k], sigma[k], om[k]);
}
#endif

}  // namespace

// x, y: n
void Gelu(const float* x, float* y, size_t n) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
#if !HWY_HAVE_SCALABLE
  constexpr size_t K = kUnroll;
  for (; i + K * N <= n; i += K * N) {
    V xv[K], xc[K], sigma[K], om[K];
    for (size_t k = 0; k < K; ++k) xv[k] = hn::LoadU(d, x + i + k * N);
    SigmoidK<K>(d, xv, xc, sigma, om);
    for (size_t k = 0; k < K; ++k) hn::StoreU(hn::Mul(xv[k], sigma[k]), d, y + i + k * N);
  }
#endif
  for (; i + N <= n; i += N) hn::StoreU(GeluV(d, hn::LoadU(d, x + i)), d, y + i);
  if (i < n) {
    part::Store(d, GeluV(d, part::Load(d, x + i, n - i)), y + i, n - i);
  }
}

// x, dy, dx: n. dx = dy gelu'(x).
void GeluBwd(const float* x, const float* dy, float* dx, size_t n) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
#if !HWY_HAVE_SCALABLE
  constexpr size_t K = kUnroll;
  for (; i + K * N <= n; i += K * N) {
    V xv[K], xc[K], sigma[K], om[K];
    for (size_t k = 0; k < K; ++k) xv[k] = hn::LoadU(d, x + i + k * N);
    SigmoidK<K>(d, xv, xc, sigma, om);
    for (size_t k = 0; k < K; ++k)
      hn::StoreU(hn::Mul(hn::LoadU(d, dy + i + k * N), GradFromSigma(d, xc[k], sigma[k], om[k])), d,
                 dx + i + k * N);
  }
#endif
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
  using V = hn::Vec<decltype(d)>;
  const size_t N = hn::Lanes(d);
  V yv, gv;
  size_t i = 0;
#if !HWY_HAVE_SCALABLE
  constexpr size_t K = kUnroll;
  for (; i + K * N <= n; i += K * N) {
    // Every load of the block before its first store (x may alias an output).
    V xv[K], xc[K], sigma[K], om[K];
    for (size_t k = 0; k < K; ++k) xv[k] = hn::LoadU(d, x + i + k * N);
    SigmoidK<K>(d, xv, xc, sigma, om);
    for (size_t k = 0; k < K; ++k) {
      hn::StoreU(hn::Mul(xv[k], sigma[k]), d, y + i + k * N);
      hn::StoreU(GradFromSigma(d, xc[k], sigma[k], om[k]), d, dydx + i + k * N);
    }
  }
#endif
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
