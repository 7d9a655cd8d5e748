// SPDX-License-Identifier: Apache-2.0
// The Highway row softmax and its backward pass, written once for softmax_rows(_bwd)
// (softmax_hwy.cc) and attention(_bwd) (attention_hwy.cc), with an accuracy policy. One copy per
// Highway target (per-target include guard, Highway's "-inl.h" convention).
//
// Forward, three passes over a row of n active elements: m = max scale * x; y = e^t with
// t = scale * x - m, summed; y *= 1 / sum. Backward: s = sum dy .* y; dx = scale * y .* (dy - s).
// The passes are shared; the policy decides how t, e^t, the sums and the reciprocal are rounded.
// Error bounds below: u = 2^-24, t the element's exponent, n the row length, ref the double
// result from the same float inputs; forward |y - ref| <= atol + rtol |ref| with atol = FLT_MIN
// (below it e^t is subnormal and has no relative accuracy); backward relative to
// mag = |ref| + |scale y| sum |dy .* y| (the terms of dy - s cancel).
//
// Accuracy::kAccurate (softmax_rows, softmax_rows_bwd; budget 1e-6 = 16.8 u, docs/kernels.md).
//   t is formed error-free as a float pair (t_hi, t_lo) with FMA and TwoSum (rounding t alone
//   would cost |t| u relative, up to 6e-6 at t = -100); e^t = Exp(t_hi) (1 + t_lo) with
//   Highway's hn::Exp (<= 1 ULP); the row sum in double, its reciprocal rounded once. Backward:
//   s in double, subtracted as the float pair s_hi + s_lo. Measured (AVX2, AVX-512; rows of 1 to
//   2048, |t| up to ~100): forward <= 3.4 u |ref|, backward <= 1.8 u mag. Pinned by the harness
//   cases of cases_softmax.cc at the 1e-6 budget.
// Accuracy::kFast (attention, attention_bwd). t = fl(z - m) for the float score z = fl(scale x)
//   (attention's GEMM has scaled already: scale = 1, z = x; the bounds are against the softmax
//   of z), e^t by exp-inl.h's ExpVec (<= 2 ULP), float row sum, reciprocal 1 / sum in float.
//   Backward: s as a float FMA sum. Documented bound, pinned by test_attention.cc for every
//   attention variant (the intrinsics ones follow the same recipe) on rows of 1 to 512:
//     forward  rtol = (|t| + 6 + sqrt(n)) u,   backward rtol = (4 + sqrt(n)) u of mag.
//   Measured on AVX2 and AVX-512: forward (|t| + 5.1) u, backward 3.0 u. The |t| u term is the
//   rounding of t, so for |t| > ~12 the fast row misses softmax_rows' budget (5e-6 at t = -80).
//   The sqrt(n) term is the float row sum, whose error grows with the terms per lane: a simulation
//   of this recipe with one lane reached (|t| + 15) u at n = 512 (it is a measured bound, not a
//   proof; float sums of adversarial rows can do worse).
// Why attention takes kFast: its probabilities only enter O = P V and the backward GEMMs, float
// sums over n products that round at the same ~sqrt(n) u level as kFast's row sum, so kAccurate
// would not change the order of attention's error, and its budget ((1e-5 + 1e-5 |ref|) sqrt(K),
// docs/kernels.md) is ~100 times either bound. kAccurate would cost attention.hwy (forward
// +3..23%, median +17%; backward -4..+11%, median +3%, i.e. within the noise; n = 128..256,
// d = 64, avx2 and avx512, medians of 3 alternating rounds of phaselab_bench on a loaded machine).
//
// Two exponentials: the policy needs both as long as results must not change. kFast uses ExpVec
// (exp_poly.inc, the one polynomial of the Highway, intrinsics and xsimd backends; faster: one
// integer add where hn::Exp converts and scales twice). kAccurate uses Highway's hn::Exp (<= 1
// ULP), with which its bounds above were measured; moving it to ExpVec (<= 2 ULP) would change
// softmax_rows' results and needs its own accuracy and speed check (not done here).
//
// NaN inputs: results unspecified (the row maximum depends on how lanes are combined).
#if defined(PHASELAB_KERNELS_SOFTMAX_ROW_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PHASELAB_KERNELS_SOFTMAX_ROW_INL_H_
#undef PHASELAB_KERNELS_SOFTMAX_ROW_INL_H_
#else
#define PHASELAB_KERNELS_SOFTMAX_ROW_INL_H_
#endif

#include <hwy/highway.h>
// clang-format off
#include <hwy/contrib/math/math-inl.h>
// clang-format on

#include <algorithm>
#include <limits>

#include "kernels/exp/exp-inl.h"
#include "phaselab/hwy_part-inl.h"
#include "phaselab/hwy_wide_sum-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pl {
namespace HWY_NAMESPACE {
namespace softmax {
namespace hn = hwy::HWY_NAMESPACE;

enum class Accuracy { kFast, kAccurate };

// The active length of row r: with `causal`, columns 0..r.
inline size_t ActiveLength(size_t r, size_t cols, int causal) {
  return causal ? std::min(r + 1, cols) : cols;
}

// e^(scale * x - m), neg_m = -m, m the row maximum of the float products scale * x.
template <Accuracy kAcc, class D, class V = hn::Vec<D>>
HWY_INLINE V ExpShifted(D d, V x, V vscale, V neg_m) {
  if constexpr (kAcc == Accuracy::kFast) {
    // Two roundings when scale != 1 (attention passes scores already scaled, scale = 1, and the
    // compiler drops the multiply; an FMA would not fold and costs a register copy per vector).
    return exp_detail::ExpVec(d, hn::Add(hn::Mul(vscale, x), neg_m));
  } else {
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
}

template <class D>
HWY_INLINE void FillZero(D d, float* y, size_t n) {
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Zero(d), d, y + i);
  for (; i < n; ++i) y[i] = 0.f;
}

// The first `valid` lanes at p, zeros in the others. With room (the row holds a whole vector
// from p on, as a causal row's tail does until the last rows) one full load, masked; otherwise
// part::Load, a copy through a stack buffer that costs several times more.
template <class D>
HWY_INLINE hn::Vec<D> LoadTail(D d, const float* p, size_t valid, bool room) {
  return room ? hn::IfThenElseZero(hn::FirstN(d, valid), hn::LoadU(d, p)) : part::Load(d, p, valid);
}

// y[0:valid) = v, then zeros up to y + len (v's lanes from `valid` on already zero where room:
// one full store, then the rest).
template <class D>
HWY_INLINE void StoreTailAndZero(D d, hn::Vec<D> v, float* y, size_t valid, size_t len, bool room) {
  const size_t N = hn::Lanes(d);
  if (room) {
    hn::StoreU(hn::IfThenElseZero(hn::FirstN(d, valid), v), d, y);
    FillZero(d, y + N, len - N);
  } else {
    part::Store(d, v, y, valid);
    FillZero(d, y + valid, len - valid);
  }
}

// y[0:n) = softmax(scale * x[0:n)), y[n:cols) = 0. x may alias y.
template <Accuracy kAcc>
HWY_INLINE void Row(const float* x, float* y, size_t n, size_t cols, float scale) {
  const hn::ScalableTag<float> d;
  const hn::Repartition<double, decltype(d)> dd;
  using V = hn::Vec<decltype(d)>;
  const size_t N = hn::Lanes(d);
  const size_t tail = n % N, body = n - tail;
  const auto mtail = hn::FirstN(d, tail);
  const V vscale = hn::Set(d, scale);
  const V neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());

  // Pass 1: m = max_c scale * x[c] (two accumulators to hide the Max latency).
  V mx0 = neg_inf, mx1 = neg_inf;
  size_t c = 0;
  for (; c + 2 * N <= body; c += 2 * N) {
    mx0 = hn::Max(mx0, hn::Mul(vscale, hn::LoadU(d, x + c)));
    mx1 = hn::Max(mx1, hn::Mul(vscale, hn::LoadU(d, x + c + N)));
  }
  if (c < body) mx0 = hn::Max(mx0, hn::Mul(vscale, hn::LoadU(d, x + c)));
  // The tail is loaded once and kept in registers through the three passes (a partial load
  // or store costs a copy through a stack buffer, and reloading what was just stored there a
  // store-forwarding stall: most of a short row's time when every row has a tail, as in causal
  // attention).
  const bool room = body + N <= cols;
  const V xtail = tail ? LoadTail(d, x + body, tail, room) : hn::Zero(d);
  if (tail) mx1 = hn::Max(mx1, hn::IfThenElse(mtail, hn::Mul(vscale, xtail), neg_inf));
  const V neg_m = hn::Neg(hn::MaxOfLanes(d, hn::Max(mx0, mx1)));

  // Pass 2: y = e^(scale x - m) and the row sum (kAccurate: in double; kFast: in float).
  auto sum_lo = hn::Zero(dd), sum_hi = hn::Zero(dd);
  V sum = hn::Zero(d);
  for (c = 0; c < body; c += N) {
    const V e = ExpShifted<kAcc>(d, hn::LoadU(d, x + c), vscale, neg_m);
    hn::StoreU(e, d, y + c);
    if constexpr (kAcc == Accuracy::kAccurate) {
      WideAdd(d, e, sum_lo, sum_hi);
    } else {
      sum = hn::Add(sum, e);
    }
  }
  V etail = hn::Zero(d);
  if (tail) {
    // Inactive lanes load 0, whose e^(-m) may be anything: zero them before summing.
    etail = hn::IfThenElseZero(mtail, ExpShifted<kAcc>(d, xtail, vscale, neg_m));
    if constexpr (kAcc == Accuracy::kAccurate) {
      WideAdd(d, etail, sum_lo, sum_hi);
    } else {
      sum = hn::Add(sum, etail);
    }
  }

  // Pass 3: y *= 1 / sum (kAccurate: the reciprocal rounded once, from double).
  V inv = hn::Zero(d);
  if constexpr (kAcc == Accuracy::kAccurate) {
    inv = hn::Set(d, static_cast<float>(1.0 / WideTotal(dd, sum_lo, sum_hi)));
  } else {
    inv = hn::Div(hn::Set(d, 1.f), hn::SumOfLanes(d, sum));
  }
  for (c = 0; c < body; c += N) hn::StoreU(hn::Mul(hn::LoadU(d, y + c), inv), d, y + c);
  if (tail)
    StoreTailAndZero(d, hn::Mul(etail, inv), y + body, tail, cols - body, room);
  else
    FillZero(d, y + n, cols - n);
}

// dx[0:n) = scale * y .* (dy - s), s = sum_c dy[c] y[c] over [0:n); dx[n:cols) = 0. dx may alias
// dy.
template <Accuracy kAcc>
HWY_INLINE void BwdRow(const float* y, const float* dy, float* dx, size_t n, size_t cols,
                       float scale) {
  const hn::ScalableTag<float> d;
  const hn::Repartition<double, decltype(d)> dd;
  using V = hn::Vec<decltype(d)>;
  const size_t N = hn::Lanes(d);
  const size_t tail = n % N, body = n - tail;
  const V vscale = hn::Set(d, scale);

  // Pass 1: s (kAccurate: in double with exact products, kept as the float pair s_hi + s_lo;
  // kFast: a float FMA sum, s_lo unused).
  auto acc_lo = hn::Zero(dd), acc_hi = hn::Zero(dd);
  V acc = hn::Zero(d);
  size_t c = 0;
  for (; c < body; c += N) {
    if constexpr (kAcc == Accuracy::kAccurate) {
      WideAddProduct(d, hn::LoadU(d, dy + c), hn::LoadU(d, y + c), acc_lo, acc_hi);
    } else {
      acc = hn::MulAdd(hn::LoadU(d, y + c), hn::LoadU(d, dy + c), acc);
    }
  }
  // The tails are loaded once (see Row).
  const bool room = body + N <= cols;
  const V ytail = tail ? LoadTail(d, y + body, tail, room) : hn::Zero(d);
  const V dytail = tail ? LoadTail(d, dy + body, tail, room) : hn::Zero(d);
  if (tail) {
    if constexpr (kAcc == Accuracy::kAccurate) {
      WideAddProduct(d, dytail, ytail, acc_lo, acc_hi);
    } else {
      acc = hn::MulAdd(ytail, dytail, acc);
    }
  }
  V s_hi = hn::Zero(d), s_lo = hn::Zero(d);
  if constexpr (kAcc == Accuracy::kAccurate) {
    const double s_d = WideTotal(dd, acc_lo, acc_hi);
    const float s_hi_f = static_cast<float>(s_d);
    s_hi = hn::Set(d, s_hi_f);
    s_lo = hn::Set(d, static_cast<float>(s_d - s_hi_f));
  } else {
    s_hi = hn::SumOfLanes(d, acc);
  }

  // Pass 2: dx = (scale y) (dy - s); kAccurate: ((dy - s_hi) - s_lo), dy - s_hi exact when they
  // nearly cancel.
  for (c = 0; c < body; c += N) {
    V g = hn::Sub(hn::LoadU(d, dy + c), s_hi);
    if constexpr (kAcc == Accuracy::kAccurate) g = hn::Sub(g, s_lo);
    hn::StoreU(hn::Mul(hn::Mul(vscale, hn::LoadU(d, y + c)), g), d, dx + c);
  }
  if (tail) {
    V g = hn::Sub(dytail, s_hi);
    if constexpr (kAcc == Accuracy::kAccurate) g = hn::Sub(g, s_lo);
    StoreTailAndZero(d, hn::Mul(hn::Mul(vscale, ytail), g), dx + body, tail, cols - body, room);
  } else {
    FillZero(d, dx + n, cols - n);
  }
}

// x, y: rows x cols; row r takes its first ActiveLength(r, cols, causal) columns. x may alias y.
template <Accuracy kAcc>
HWY_INLINE void Rows(const float* x, float* y, size_t rows, size_t cols, float scale, int causal) {
  for (size_t r = 0; r < rows; ++r)
    Row<kAcc>(x + r * cols, y + r * cols, ActiveLength(r, cols, causal), cols, scale);
}

// y, dy, dx: rows x cols, masked entries of dx written as 0. dx may alias dy.
template <Accuracy kAcc>
HWY_INLINE void RowsBwd(const float* y, const float* dy, float* dx, size_t rows, size_t cols,
                        float scale, int causal) {
  for (size_t r = 0; r < rows; ++r)
    BwdRow<kAcc>(y + r * cols, dy + r * cols, dx + r * cols, ActiveLength(r, cols, causal), cols,
                 scale);
}

}  // namespace softmax
}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();

#endif  // PHASELAB_KERNELS_SOFTMAX_ROW_INL_H_
