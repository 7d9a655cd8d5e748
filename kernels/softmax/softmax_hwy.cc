// SPDX-License-Identifier: Apache-2.0
// softmax_rows.hwy.<isa>, softmax_rows_bwd.hwy.<isa>: three passes per row (max, exp + sum,
// scale), every target from one source.
//
// Accuracy (budget: 1e-6 relative per element). The exponent t = scale * x - M is formed
// error-free as a float pair (t_hi, t_lo) with FMA and TwoSum: rounding scale * x to float alone
// would cost |t| * 6e-8 relative in e^t, i.e. 6e-6 at t = -100. Then e^t = Exp(t_hi) (1 + t_lo)
// (Highway's Exp, <= 1 ULP). The row sum is accumulated in double. The backward pass forms
// s = sum dy .* y in double and subtracts it as a float pair, so dy - s keeps its relative
// accuracy even when dy[c] and s nearly cancel.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/softmax/softmax_hwy.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
// clang-format off
#include <hwy/contrib/math/math-inl.h>
// clang-format on

#include <algorithm>
#include <limits>

#include "phaselab/hwy_part-inl.h"
#include "phaselab/hwy_wide_sum-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pl {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

namespace {

// e^(scale * x - m) for x, with m the row maximum of the float products scale * x.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V ExpShifted(D d, V x, V vscale, V neg_m) {
  const V p = hn::Mul(vscale, x);
  const V p_lo = hn::MulSub(vscale, x, p);  // exact: scale * x = p + p_lo
  // TwoSum: p - m = t_hi + err exactly.
  const V t_hi = hn::Add(p, neg_m);
  const V b = hn::Sub(t_hi, p);
  const V err = hn::Add(hn::Sub(p, hn::Sub(t_hi, b)), hn::Sub(neg_m, b));
  // Below -104 e^t is 0 in float anyway; clamping keeps Exp in its valid range and drops a
  // NaN t_lo when p - m overflowed to -inf.
  const V kLow = hn::Set(d, -104.f);
  const auto tiny = hn::Lt(t_hi, kLow);
  const V t_lo = hn::IfThenZeroElse(tiny, hn::Add(err, p_lo));
  const V e = hn::Exp(d, hn::Max(t_hi, kLow));
  return hn::MulAdd(e, t_lo, e);  // e^(t_hi + t_lo) = e^t_hi (1 + t_lo) to O(t_lo^2)
}

template <class D>
HWY_INLINE void FillZero(D d, float* y, size_t n) {
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Zero(d), d, y + i);
  for (; i < n; ++i) y[i] = 0.f;
}

}  // namespace

// x, y: rows x cols; row r uses its first n(r) = (causal ? min(r + 1, cols) : cols) columns.
void SoftmaxRows(const float* x, float* y, size_t rows, size_t cols, float scale, int causal) {
  const hn::ScalableTag<float> d;
  const hn::Repartition<double, decltype(d)> dd;  // row sums
  using V = hn::Vec<decltype(d)>;
  const size_t N = hn::Lanes(d);
  const V vscale = hn::Set(d, scale);
  const V neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    const size_t n = causal ? std::min(r + 1, cols) : cols;
    const size_t tail = n % N, body = n - tail;
    const auto mtail = hn::FirstN(d, tail);

    // Pass 1: m = max_c scale * x[c] (two accumulators to hide the Max latency).
    V mx0 = neg_inf, mx1 = neg_inf;
    size_t c = 0;
    for (; c + 2 * N <= body; c += 2 * N) {
      mx0 = hn::Max(mx0, hn::Mul(vscale, hn::LoadU(d, xr + c)));
      mx1 = hn::Max(mx1, hn::Mul(vscale, hn::LoadU(d, xr + c + N)));
    }
    if (c < body) mx0 = hn::Max(mx0, hn::Mul(vscale, hn::LoadU(d, xr + c)));
    if (tail)
      mx1 = hn::Max(
          mx1, hn::IfThenElse(mtail, hn::Mul(vscale, part::Load(d, xr + body, tail)), neg_inf));
    const V neg_m = hn::Neg(hn::MaxOfLanes(d, hn::Max(mx0, mx1)));

    // Pass 2: y = e^(scale x - m), sum in double.
    auto sum_lo = hn::Zero(dd), sum_hi = hn::Zero(dd);
    for (c = 0; c < body; c += N) {
      const V e = ExpShifted(d, hn::LoadU(d, xr + c), vscale, neg_m);
      hn::StoreU(e, d, yr + c);
      WideAdd(d, e, sum_lo, sum_hi);
    }
    if (tail) {
      // Inactive lanes load 0, whose e^(-m) may be anything: zero them before summing.
      const V e =
          hn::IfThenElseZero(mtail, ExpShifted(d, part::Load(d, xr + body, tail), vscale, neg_m));
      part::Store(d, e, yr + body, tail);
      WideAdd(d, e, sum_lo, sum_hi);
    }

    // Pass 3: y *= 1 / sum (the reciprocal rounded once, from double).
    const V inv = hn::Set(d, static_cast<float>(1.0 / WideTotal(dd, sum_lo, sum_hi)));
    for (c = 0; c < body; c += N) hn::StoreU(hn::Mul(hn::LoadU(d, yr + c), inv), d, yr + c);
    if (tail) part::Store(d, hn::Mul(part::Load(d, yr + body, tail), inv), yr + body, tail);
    FillZero(d, yr + n, cols - n);
  }
}

// y, dy, dx: rows x cols. dx = scale * y .* (dy - s), s = sum_c dy[c] y[c]; masked entries 0.
void SoftmaxRowsBwd(const float* y, const float* dy, float* dx, size_t rows, size_t cols,
                    float scale, int causal) {
  const hn::ScalableTag<float> d;
  const hn::Repartition<double, decltype(d)> dd;  // row sums
  using V = hn::Vec<decltype(d)>;
  const size_t N = hn::Lanes(d);
  const V vscale = hn::Set(d, scale);
  for (size_t r = 0; r < rows; ++r) {
    const float* yr = y + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    const size_t n = causal ? std::min(r + 1, cols) : cols;
    const size_t tail = n % N, body = n - tail;

    // Pass 1: s in double (exact products), kept as the float pair s_hi + s_lo.
    auto acc_lo = hn::Zero(dd), acc_hi = hn::Zero(dd);
    size_t c = 0;
    for (; c < body; c += N)
      WideAddProduct(d, hn::LoadU(d, dyr + c), hn::LoadU(d, yr + c), acc_lo, acc_hi);
    if (tail)
      WideAddProduct(d, part::Load(d, dyr + body, tail), part::Load(d, yr + body, tail), acc_lo,
                     acc_hi);
    const double s_d = WideTotal(dd, acc_lo, acc_hi);
    const float s_hi_f = static_cast<float>(s_d);
    const V s_hi = hn::Set(d, s_hi_f);
    const V s_lo = hn::Set(d, static_cast<float>(s_d - s_hi_f));

    // Pass 2: dx = (scale y) ((dy - s_hi) - s_lo); dy - s_hi is exact when they nearly cancel.
    for (c = 0; c < body; c += N) {
      const V g = hn::Sub(hn::Sub(hn::LoadU(d, dyr + c), s_hi), s_lo);
      hn::StoreU(hn::Mul(hn::Mul(vscale, hn::LoadU(d, yr + c)), g), d, dxr + c);
    }
    if (tail) {
      const V g = hn::Sub(hn::Sub(part::Load(d, dyr + body, tail), s_hi), s_lo);
      part::Store(d, hn::Mul(hn::Mul(vscale, part::Load(d, yr + body, tail)), g), dxr + body, tail);
    }
    FillZero(d, dxr + n, cols - n);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();
