// SPDX-License-Identifier: Apache-2.0
// adam.hwy.<isa>, adamw.hwy.<isa>: one fused pass over (param, grad, m, v) in float, bias
// corrections folded into two scalars. sgld.hwy.<isa>: the gradient step plus the noise of
// gaussian.hwy.<isa> (the same group function, so the same numbers), all targets.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/optim/optim_hwy.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>

#include "kernels/random/philox-inl.h"
#include "phaselab/hwy_part-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pl {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

namespace {

// The constants of one Adam step. With c = 1 - beta^step (in double),
//   mhat / (sqrt(vhat) + eps) = (m / c1) / (sqrt(v / c2) + eps)
//                             = (sqrt(c2) / c1) m / (sqrt(v) + eps sqrt(c2)),
// so lr sqrt(c2) / c1 and eps sqrt(c2) are the two folded scalars (no per-element scaling of v).
struct AdamConsts {
  float one_minus_b1, one_minus_b2, step_size, eps;
};

AdamConsts adam_consts(float lr, float beta1, float beta2, float eps, int64_t step) {
  const double c1 = 1.0 - std::pow(double{beta1}, double(step));
  const double c2 = 1.0 - std::pow(double{beta2}, double(step));
  return {static_cast<float>(1.0 - beta1), static_cast<float>(1.0 - beta2),
          static_cast<float>(lr * std::sqrt(c2) / c1), static_cast<float>(eps * std::sqrt(c2))};
}

// One Adam/AdamW element-wise update on vectors (SVE vectors cannot live in lambda captures,
// hence a function). decoupled == false: weight decay folded into g (Adam); true: AdamW.
// The moments as m + (1 - b1)(g - m) and v + (1 - b2)(g^2 - v): one FMA each (plus a subtract
// on the add pipes, resp. the fused g g - v), instead of a multiply and an FMA.
template <bool kDecoupled, class D, class V = hn::Vec<D>>
HWY_INLINE V AdamStep(D d, const AdamConsts& c, float wd, float decay, V p, V g, V& mv, V& vv) {
  if (!kDecoupled) g = hn::MulAdd(hn::Set(d, wd), p, g);
  mv = hn::MulAdd(hn::Set(d, c.one_minus_b1), hn::Sub(g, mv), mv);
  vv = hn::MulAdd(hn::Set(d, c.one_minus_b2), hn::MulSub(g, g, vv), vv);
  // m / (sqrt(v) + eps'). On AVX2/AVX-512 the reciprocal estimate (12 resp. 14 bits) plus
  // one Newton step r <- r (2 - den r) (error ~ its square, <= 2^-24) is cheaper than a division;
  // other targets' estimates are too coarse (NEON: 8 bits), so they divide.
  const V den = hn::Add(hn::Sqrt(vv), hn::Set(d, c.eps));
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  const V r0 = hn::ApproximateReciprocal(den);
  const V ratio = hn::Mul(hn::Mul(mv, r0), hn::NegMulAdd(den, r0, hn::Set(d, 2.0f)));
#else
  const V ratio = hn::Div(mv, den);
#endif
  if (kDecoupled) p = hn::Mul(p, hn::Set(d, decay));  // AdamW: p (1 - lr wd)
  return hn::NegMulAdd(hn::Set(d, c.step_size), ratio, p);
}

// Adam / AdamW over n elements. The tail is a partial vector, so every element sees the same
// arithmetic.
template <bool kDecoupled>
HWY_INLINE void AdamFused(float* HWY_RESTRICT param, const float* HWY_RESTRICT grad,
                          float* HWY_RESTRICT m, float* HWY_RESTRICT v, size_t n,
                          const AdamConsts& c, float lr, float wd) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const float decay = static_cast<float>(1.0 - double{lr} * wd);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    auto mv = hn::LoadU(d, m + i), vv = hn::LoadU(d, v + i);
    const auto p = AdamStep<kDecoupled>(d, c, wd, decay, hn::LoadU(d, param + i),
                                        hn::LoadU(d, grad + i), mv, vv);
    hn::StoreU(mv, d, m + i);
    hn::StoreU(vv, d, v + i);
    hn::StoreU(p, d, param + i);
  }
  if (i < n) {
    const size_t r = n - i;
    auto mv = part::Load(d, m + i, r), vv = part::Load(d, v + i, r);
    const auto p = AdamStep<kDecoupled>(d, c, wd, decay, part::Load(d, param + i, r),
                                        part::Load(d, grad + i, r), mv, vv);
    part::Store(d, mv, m + i, r);
    part::Store(d, vv, v + i, r);
    part::Store(d, p, param + i, r);
  }
}

// theta[i] = theta[i] - eta grad[i] + scale xi[i] for i < n (theta, grad, xi: n).
HWY_INLINE void SgldUpdate(float* HWY_RESTRICT theta, const float* HWY_RESTRICT grad,
                           const float* HWY_RESTRICT xi, size_t n, float eta, float scale) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const auto etav = hn::Set(d, eta), sv = hn::Set(d, scale);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto t = hn::NegMulAdd(etav, hn::LoadU(d, grad + i), hn::LoadU(d, theta + i));
    hn::StoreU(hn::MulAdd(sv, hn::LoadU(d, xi + i), t), d, theta + i);
  }
  if (i < n) {
    const size_t r = n - i;
    const auto t = hn::NegMulAdd(etav, part::Load(d, grad + i, r), part::Load(d, theta + i, r));
    part::Store(d, hn::MulAdd(sv, part::Load(d, xi + i, r), t), theta + i, r);
  }
}

}  // namespace

// param, grad, m, v: n
void Adam(float* param, const float* grad, float* m, float* v, size_t n, float lr, float beta1,
          float beta2, float eps, float weight_decay, int64_t step) {
  AdamFused<false>(param, grad, m, v, n, adam_consts(lr, beta1, beta2, eps, step), lr,
                   weight_decay);
}

// param, grad, m, v: n
void Adamw(float* param, const float* grad, float* m, float* v, size_t n, float lr, float beta1,
           float beta2, float eps, float weight_decay, int64_t step) {
  AdamFused<true>(param, grad, m, v, n, adam_consts(lr, beta1, beta2, eps, step), lr, weight_decay);
}

// theta, grad: n. The noise is generated a group of Philox blocks at a time into an aligned
// buffer (the group that gaussian.hwy writes), then applied to the matching elements.
void Sgld(float* theta, const float* grad, size_t n, float eta, float temperature, uint64_t seed,
          uint64_t stream, uint64_t counter) {
  const float scale = static_cast<float>(std::sqrt(2.0 * eta * temperature));
  const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  const size_t G = rng::GroupSize();
  HWY_ALIGN float xi[rng::kMaxGroup];
  size_t i = 0;
  while (i < n) {
    const uint64_t t = counter + i;
    const size_t lane = static_cast<size_t>(t % 4);
    rng::GaussianGroup(t / 4, k0, k1, stream, xi);
    const size_t take = std::min(G - lane, n - i);
    SgldUpdate(theta + i, grad + i, xi + lane, take, eta, scale);
    i += take;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();
