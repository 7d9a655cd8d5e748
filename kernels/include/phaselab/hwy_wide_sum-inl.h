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

// WideTotals(dd, s): the totals of kWideTotalRows rows at once, lane k = the sum of every lane of
// s[k] (s[k] = Add(lo, hi) of row k), bit for bit WideTotal(dd, lo, hi) of each row: a transpose
// and add that forms every sum of SumOfLanes (Highway 1.0.3) from the same two operands, in the
// same order, for several rows per instruction. x86 only (AVX2: 4 rows, AVX-512: 8 rows), where
// PHASELAB_HWY_WIDE_TOTALS is 1; other targets keep WideTotal per row.
#undef PHASELAB_HWY_WIDE_TOTALS
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#define PHASELAB_HWY_WIDE_TOTALS 1
constexpr size_t kWideTotalRows = 8;

// _mm512_reduce_add_pd (SumOfLanes): t = hi256 + lo256, u = hi128(t) + lo128(t), u[0] + u[1].
template <class DD>
HWY_INLINE hn::Vec<DD> WideTotals(DD /*dd*/, const hn::Vec<DD>* s) {
  using VD = hn::Vec<DD>;
  // Rows p, q: [t of p | t of q] (four lanes each).
  auto halves = [](__m512d p, __m512d q) HWY_ATTR {
    const __m512d lo = _mm512_shuffle_f64x2(p, q, _MM_SHUFFLE(1, 0, 1, 0));
    const __m512d hi = _mm512_shuffle_f64x2(p, q, _MM_SHUFFLE(3, 2, 3, 2));
    return _mm512_add_pd(hi, lo);
  };
  // [t of p | t of q], [t of r | t of s]: u of p, q, r, s (two lanes each).
  auto quarters = [](__m512d pq, __m512d rs) HWY_ATTR {
    const __m512d lo = _mm512_shuffle_f64x2(pq, rs, _MM_SHUFFLE(2, 0, 2, 0));
    const __m512d hi = _mm512_shuffle_f64x2(pq, rs, _MM_SHUFFLE(3, 1, 3, 1));
    return _mm512_add_pd(hi, lo);
  };
  const __m512d even = quarters(halves(s[0].raw, s[2].raw), halves(s[4].raw, s[6].raw));
  const __m512d odd = quarters(halves(s[1].raw, s[3].raw), halves(s[5].raw, s[7].raw));
  // Lanes 2i, 2i + 1: u[0] + u[1] of rows 2i and 2i + 1.
  return VD{_mm512_add_pd(_mm512_unpacklo_pd(even, odd), _mm512_unpackhi_pd(even, odd))};
}
#elif HWY_TARGET == HWY_AVX2
#define PHASELAB_HWY_WIDE_TOTALS 1
constexpr size_t kWideTotalRows = 4;

// SumOfLanes: t = swap128(s) + s (lane 0: s2 + s0, lane 1: s3 + s1), then t[0] + t[1].
template <class DD>
HWY_INLINE hn::Vec<DD> WideTotals(DD /*dd*/, const hn::Vec<DD>* s) {
  using VD = hn::Vec<DD>;
  // Rows p, q: [t of p | t of q] (two lanes each).
  auto halves = [](__m256d p, __m256d q) HWY_ATTR {
    const __m256d lo = _mm256_permute2f128_pd(p, q, 0x20);
    const __m256d hi = _mm256_permute2f128_pd(p, q, 0x31);
    return _mm256_add_pd(hi, lo);
  };
  const __m256d t02 = halves(s[0].raw, s[2].raw), t13 = halves(s[1].raw, s[3].raw);
  // Lanes 0..3: t[0] + t[1] of rows 0, 1, 2, 3.
  return VD{_mm256_add_pd(_mm256_unpacklo_pd(t02, t13), _mm256_unpackhi_pd(t02, t13))};
}
#else
#define PHASELAB_HWY_WIDE_TOTALS 0
#endif

}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();

#endif  // PHASELAB_HWY_WIDE_SUM_INL_H_
