// SPDX-License-Identifier: Apache-2.0
// sum.hwy.<isa>, dot.hwy.<isa>, max.hwy.<isa>: the fixed order of fixed_order.hpp with the 16
// accumulators held in K = 16 / N vectors of N lanes (lane l of vector k is accumulator k N + l),
// so every accumulator sees the same additions in the same order as in the scalar reference and
// the results are bit-identical on every target. Full blocks of 16 run vectorised; the
// accumulators are then stored, the last n % 16 elements added in scalar (by their index), and
// the tree folded in scalar.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/reduce/reduce_hwy.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <limits>
#include <type_traits>

#include "kernels/reduce/fixed_order.hpp"

HWY_BEFORE_NAMESPACE();
namespace pl {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

namespace {

constexpr size_t kAcc = reduce::kAccumulators;

// The K accumulator vectors a0 .. a7 are named variables (SVE vectors cannot live in arrays);
// PL_EACH_ACC(X) applies X(k, ak) to each, X guarding its body with `if (K > k)`.
#define PL_EACH_ACC(X) X(0, a0) X(1, a1) X(2, a2) X(3, a3) X(4, a4) X(5, a5) X(6, a6) X(7, a7)
#define PL_STORE_ACC(k, a) \
  if (K > k) hn::StoreU(a, d, acc + k * N);

// Calls f(std::integral_constant<size_t, K>()) with the K = 16 / Lanes(d) vectors of d that hold
// the 16 accumulators; false (f not called) for one-lane vectors (HWY_SCALAR: the plain loop).
template <class D, class F>
HWY_INLINE bool WithAccumulatorVectors(D d, F f) {
  switch (hn::Lanes(d)) {
    case 2:
      f(std::integral_constant<size_t, 8>());
      return true;
    case 4:
      f(std::integral_constant<size_t, 4>());
      return true;
    case 8:
      f(std::integral_constant<size_t, 2>());
      return true;
    case 16:
      f(std::integral_constant<size_t, 1>());
      return true;
  }
  return false;
}

// Sum (kDot == false) or dot product of the first `blocks` blocks of 16 into acc[16], using K
// accumulator vectors of N = 16 / K doubles.
template <size_t K, bool kDot>
HWY_INLINE void SumBlocks(const float* HWY_RESTRICT x, const float* HWY_RESTRICT y, size_t blocks,
                          double* acc) {
  const hn::CappedTag<double, kAcc> d;
  const hn::Rebind<float, decltype(d)> df;  // N floats, promoted to N doubles
  constexpr size_t N = kAcc / K;
  auto a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (size_t b = 0; b < blocks; ++b, x += kAcc, y += kAcc) {
#define PL_TERM(k, a)                                                                          \
  if (K > k) {                                                                                 \
    const auto xv = hn::PromoteTo(d, hn::LoadU(df, x + k * N));                                \
    a = kDot ? hn::MulAdd(xv, hn::PromoteTo(d, hn::LoadU(df, y + k * N)), a) : hn::Add(a, xv); \
  }
    PL_EACH_ACC(PL_TERM)
#undef PL_TERM
  }
  PL_EACH_ACC(PL_STORE_ACC)
}

// The fixed-order sum or dot of x (and y): n.
template <bool kDot>
double SumOrDot(const float* x, const float* y, size_t n) {
  double acc[kAcc] = {};
  const size_t blocks = n / kAcc;
  const bool vector = WithAccumulatorVectors(hn::CappedTag<double, kAcc>(), [&](auto k) {
    SumBlocks<decltype(k)::value, kDot>(x, y, blocks, acc);
  });
  // The tail, or everything for one-lane vectors, by index.
  for (size_t i = vector ? blocks * kAcc : 0; i < n; ++i)
    acc[i % kAcc] += kDot ? double{x[i]} * double{y[i]} : double{x[i]};
  return reduce::fold_sum(acc);
}

// Running max of the first `blocks` blocks of 16 into acc[16] (K float vectors of N = 16 / K);
// returns whether a NaN was seen.
template <size_t K>
HWY_INLINE bool MaxBlocks(const float* HWY_RESTRICT x, size_t blocks, float* acc) {
  const hn::CappedTag<float, kAcc> d;
  constexpr size_t N = kAcc / K;
  const auto neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  auto a0 = neg_inf, a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  auto nan = hn::Zero(d);  // all-ones lanes where a NaN went by
  for (size_t b = 0; b < blocks; ++b, x += kAcc) {
#define PL_TERM(k, a)                                                \
  if (K > k) {                                                       \
    const auto xv = hn::LoadU(d, x + k * N);                         \
    a = hn::IfThenElse(hn::Gt(xv, a), xv, a); /* reduce::max_step */ \
    nan = hn::Or(nan, hn::VecFromMask(d, hn::IsNaN(xv)));            \
  }
    PL_EACH_ACC(PL_TERM)
#undef PL_TERM
  }
  PL_EACH_ACC(PL_STORE_ACC)
  return !hn::AllFalse(d, hn::MaskFromVec(nan));
}

#undef PL_STORE_ACC
#undef PL_EACH_ACC

}  // namespace

// x: n
double Sum(const float* x, size_t n) { return SumOrDot<false>(x, x, n); }

// x, y: n
double Dot(const float* x, const float* y, size_t n) { return SumOrDot<true>(x, y, n); }

// x: n; NaN if any element is NaN, -inf if n == 0.
float Max(const float* x, size_t n) {
  float acc[kAcc];
  for (float& a : acc) a = -std::numeric_limits<float>::infinity();
  const size_t blocks = n / kAcc;
  bool nan = false;
  const bool vector = WithAccumulatorVectors(hn::CappedTag<float, kAcc>(), [&](auto k) {
    nan = MaxBlocks<decltype(k)::value>(x, blocks, acc);
  });
  // The tail, or everything for one-lane vectors, by index.
  for (size_t i = vector ? blocks * kAcc : 0; i < n; ++i) {
    nan |= std::isnan(x[i]);
    acc[i % kAcc] = reduce::max_step(acc[i % kAcc], x[i]);
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : reduce::fold_max(acc);
}

}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();
