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

#include "kernels/reduce/fixed_order.hpp"

HWY_BEFORE_NAMESPACE();
namespace pl {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

namespace {

constexpr size_t kAcc = reduce::kAccumulators;

// Sum (kDot == false) or dot product of the first `blocks` blocks of 16 into acc[16], using K
// named accumulator vectors of N = 16 / K doubles (SVE vectors cannot live in arrays).
template <size_t K, bool kDot>
HWY_INLINE void SumBlocks(const float* HWY_RESTRICT x, const float* HWY_RESTRICT y, size_t blocks,
                          double* acc) {
  const hn::CappedTag<double, kAcc> dd;
  const hn::Rebind<float, decltype(dd)> df;  // N floats, promoted to N doubles
  constexpr size_t N = kAcc / K;
  auto a0 = hn::Zero(dd), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (size_t b = 0; b < blocks; ++b, x += kAcc, y += kAcc) {
#define PL_TERM(k, a)                                                                           \
  if (K > k) {                                                                                  \
    const auto xv = hn::PromoteTo(dd, hn::LoadU(df, x + k * N));                                \
    a = kDot ? hn::MulAdd(xv, hn::PromoteTo(dd, hn::LoadU(df, y + k * N)), a) : hn::Add(a, xv); \
  }
    PL_TERM(0, a0)
    PL_TERM(1, a1)
    PL_TERM(2, a2)
    PL_TERM(3, a3)
    PL_TERM(4, a4)
    PL_TERM(5, a5)
    PL_TERM(6, a6)
    PL_TERM(7, a7)
#undef PL_TERM
  }
  hn::StoreU(a0, dd, acc);
  if (K > 1) hn::StoreU(a1, dd, acc + 1 * N);
  if (K > 2) hn::StoreU(a2, dd, acc + 2 * N);
  if (K > 3) hn::StoreU(a3, dd, acc + 3 * N);
  if (K > 4) hn::StoreU(a4, dd, acc + 4 * N);
  if (K > 5) hn::StoreU(a5, dd, acc + 5 * N);
  if (K > 6) hn::StoreU(a6, dd, acc + 6 * N);
  if (K > 7) hn::StoreU(a7, dd, acc + 7 * N);
}

// The fixed-order sum or dot of x (and y): n.
template <bool kDot>
double SumOrDot(const float* x, const float* y, size_t n) {
  double acc[kAcc] = {};
  const size_t blocks = n / kAcc;
  switch (hn::Lanes(hn::CappedTag<double, kAcc>())) {
    case 2:
      SumBlocks<8, kDot>(x, y, blocks, acc);
      break;
    case 4:
      SumBlocks<4, kDot>(x, y, blocks, acc);
      break;
    case 8:
      SumBlocks<2, kDot>(x, y, blocks, acc);
      break;
    case 16:
      SumBlocks<1, kDot>(x, y, blocks, acc);
      break;
    default:  // one lane (HWY_SCALAR): the plain loop
      for (size_t i = 0; i < blocks * kAcc; ++i)
        acc[i % kAcc] += kDot ? double{x[i]} * double{y[i]} : double{x[i]};
  }
  for (size_t i = blocks * kAcc; i < n; ++i)
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
    PL_TERM(0, a0)
    PL_TERM(1, a1)
    PL_TERM(2, a2)
    PL_TERM(3, a3)
    PL_TERM(4, a4)
    PL_TERM(5, a5)
    PL_TERM(6, a6)
    PL_TERM(7, a7)
#undef PL_TERM
  }
  hn::StoreU(a0, d, acc);
  if (K > 1) hn::StoreU(a1, d, acc + 1 * N);
  if (K > 2) hn::StoreU(a2, d, acc + 2 * N);
  if (K > 3) hn::StoreU(a3, d, acc + 3 * N);
  if (K > 4) hn::StoreU(a4, d, acc + 4 * N);
  if (K > 5) hn::StoreU(a5, d, acc + 5 * N);
  if (K > 6) hn::StoreU(a6, d, acc + 6 * N);
  if (K > 7) hn::StoreU(a7, d, acc + 7 * N);
  return !hn::AllFalse(d, hn::MaskFromVec(nan));
}

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
  switch (hn::Lanes(hn::CappedTag<float, kAcc>())) {
    case 2:
      nan = MaxBlocks<8>(x, blocks, acc);
      break;
    case 4:
      nan = MaxBlocks<4>(x, blocks, acc);
      break;
    case 8:
      nan = MaxBlocks<2>(x, blocks, acc);
      break;
    case 16:
      nan = MaxBlocks<1>(x, blocks, acc);
      break;
    default:  // one lane (HWY_SCALAR): the plain loop
      for (size_t i = 0; i < blocks * kAcc; ++i) {
        nan |= std::isnan(x[i]);
        acc[i % kAcc] = reduce::max_step(acc[i % kAcc], x[i]);
      }
  }
  for (size_t i = blocks * kAcc; i < n; ++i) {
    nan |= std::isnan(x[i]);
    acc[i % kAcc] = reduce::max_step(acc[i % kAcc], x[i]);
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : reduce::fold_max(acc);
}

}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();
