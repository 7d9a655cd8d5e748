// SPDX-License-Identifier: Apache-2.0
// Hand-written intrinsics: the thin per-ISA vector layer shared by the intrin_<isa> variants.
// Each *_intrin.cc file is compiled once per instruction set (meson.build's isa_builds, each
// with only that ISA's flags; GCC 12's false -Wuninitialized in its AVX-512 headers is switched
// off there for these translation units); this header picks
// the ISA from the flags of the translation unit and opens the matching namespace
// pl::intrin_<isa>. The kernels themselves choose their register tiles per ISA (kMr, kNrv below).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>
#define PL_INTRIN_NS intrin_avx512
#define PL_INTRIN_AVX512 1
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define PL_INTRIN_NS intrin_avx2
#define PL_INTRIN_AVX2 1
#elif defined(__aarch64__)
#include <arm_neon.h>
#define PL_INTRIN_NS intrin_neon
#define PL_INTRIN_NEON 1
#else
#error "intrinsics variants are compiled only for AVX2, AVX-512 and aarch64 NEON"
#endif

namespace pl::PL_INTRIN_NS {

// dst[c * ldd + r] = src[r * lds + c] for r, c < 4 (a 4 x 4 block transposed through
// 128-bit registers).
#if PL_INTRIN_NEON
inline void transpose4x4(const float* src, size_t lds, float* dst, size_t ldd) {
  const float32x4x2_t t01 = vtrnq_f32(vld1q_f32(src), vld1q_f32(src + lds));
  const float32x4x2_t t23 = vtrnq_f32(vld1q_f32(src + 2 * lds), vld1q_f32(src + 3 * lds));
  vst1q_f32(dst, vcombine_f32(vget_low_f32(t01.val[0]), vget_low_f32(t23.val[0])));
  vst1q_f32(dst + ldd, vcombine_f32(vget_low_f32(t01.val[1]), vget_low_f32(t23.val[1])));
  vst1q_f32(dst + 2 * ldd, vcombine_f32(vget_high_f32(t01.val[0]), vget_high_f32(t23.val[0])));
  vst1q_f32(dst + 3 * ldd, vcombine_f32(vget_high_f32(t01.val[1]), vget_high_f32(t23.val[1])));
}
#else
inline void transpose4x4(const float* src, size_t lds, float* dst, size_t ldd) {
  __m128 r0 = _mm_loadu_ps(src), r1 = _mm_loadu_ps(src + lds), r2 = _mm_loadu_ps(src + 2 * lds),
         r3 = _mm_loadu_ps(src + 3 * lds);
  _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
  _mm_storeu_ps(dst, r0);
  _mm_storeu_ps(dst + ldd, r1);
  _mm_storeu_ps(dst + 2 * ldd, r2);
  _mm_storeu_ps(dst + 3 * ldd, r3);
}
#endif

#if PL_INTRIN_AVX512
using V = __m512;
constexpr size_t kW = 16;
// gemm register tile: kMr rows x kNrv vectors of C in registers (24 of the 32 zmm).
constexpr int kMr = 6, kNrv = 4;
inline V zero() { return _mm512_setzero_ps(); }
inline V set1(float x) { return _mm512_set1_ps(x); }
inline V load(const float* p) { return _mm512_loadu_ps(p); }
inline void store(float* p, V v) { _mm512_storeu_ps(p, v); }
inline __mmask16 first_n(size_t n) {
  return static_cast<__mmask16>(n >= 16 ? 0xFFFFu : (1u << n) - 1);
}
// The first n (< kW) lanes; the others read as 0 (nothing beyond p + n is touched).
inline V load_n(const float* p, size_t n) { return _mm512_maskz_loadu_ps(first_n(n), p); }
inline void store_n(float* p, V v, size_t n) { _mm512_mask_storeu_ps(p, first_n(n), v); }
inline V add(V a, V b) { return _mm512_add_ps(a, b); }
inline V sub(V a, V b) { return _mm512_sub_ps(a, b); }
inline V mul(V a, V b) { return _mm512_mul_ps(a, b); }
inline V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }    // a b + c
inline V fnma(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }  // c - a b
inline V max(V a, V b) { return _mm512_max_ps(a, b); }
inline V min(V a, V b) { return _mm512_min_ps(a, b); }
inline float reduce_add(V v) { return _mm512_reduce_add_ps(v); }
inline float reduce_max(V v) { return _mm512_reduce_max_ps(v); }
// Lanes whose index (base + lane) is > limit are replaced by `fill` (causal masks).
inline V mask_after(V v, size_t base, size_t limit, V fill) {
  if (base + kW - 1 <= limit) return v;
  const size_t keep = limit + 1 > base ? limit + 1 - base : 0;
  return _mm512_mask_blend_ps(first_n(keep), fill, v);
}
// 2^n for integer-valued n in [-126, 127].
// Double-precision accumulation of float vectors (row sums that must stay within 1e-6).
struct DSum {
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  void add(V v) {
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
  }
  double total() const { return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi)); }
};
// Every lane in [lo, hi] (NaN lanes are not).
inline bool all_in(V x, float lo, float hi) {
  return _mm512_cmp_ps_mask(x, set1(lo), _CMP_GE_OQ) == 0xFFFF &&
         _mm512_cmp_ps_mask(x, set1(hi), _CMP_LE_OQ) == 0xFFFF;
}
// bits(e) + (bits(t) << 23): e 2^n when the low mantissa bits of t hold n (see exp below).
inline V add_exponent(V e, V t) {
  return _mm512_castsi512_ps(
      _mm512_add_epi32(_mm512_castps_si512(e), _mm512_slli_epi32(_mm512_castps_si512(t), 23)));
}
inline V pow2i(V n) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
}
#elif PL_INTRIN_AVX2
using V = __m256;
constexpr size_t kW = 8;
// gemm register tile: 6 x 2 vectors of C (12 of the 16 ymm, 2 for B, 1 broadcast).
constexpr int kMr = 6, kNrv = 2;
inline V zero() { return _mm256_setzero_ps(); }
inline V set1(float x) { return _mm256_set1_ps(x); }
inline V load(const float* p) { return _mm256_loadu_ps(p); }
inline void store(float* p, V v) { _mm256_storeu_ps(p, v); }
inline __m256i first_n(size_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), idx);
}
inline V load_n(const float* p, size_t n) { return _mm256_maskload_ps(p, first_n(n)); }
inline void store_n(float* p, V v, size_t n) { _mm256_maskstore_ps(p, first_n(n), v); }
inline V add(V a, V b) { return _mm256_add_ps(a, b); }
inline V sub(V a, V b) { return _mm256_sub_ps(a, b); }
inline V mul(V a, V b) { return _mm256_mul_ps(a, b); }
inline V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
inline V fnma(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
inline V max(V a, V b) { return _mm256_max_ps(a, b); }
inline V min(V a, V b) { return _mm256_min_ps(a, b); }
inline float reduce_add(V v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float reduce_max(V v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline V mask_after(V v, size_t base, size_t limit, V fill) {
  if (base + kW - 1 <= limit) return v;
  const size_t keep = limit + 1 > base ? limit + 1 - base : 0;
  return _mm256_blendv_ps(fill, v, _mm256_castsi256_ps(first_n(keep)));
}
struct DSum {
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  void add(V v) {
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
  double total() const {
    const __m256d s = _mm256_add_pd(lo, hi);
    __m128d t = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    return _mm_cvtsd_f64(_mm_add_sd(t, _mm_unpackhi_pd(t, t)));
  }
};
inline bool all_in(V x, float lo, float hi) {
  const V in =
      _mm256_and_ps(_mm256_cmp_ps(x, set1(lo), _CMP_GE_OQ), _mm256_cmp_ps(x, set1(hi), _CMP_LE_OQ));
  return _mm256_movemask_ps(in) == 0xFF;
}
inline V add_exponent(V e, V t) {
  return _mm256_castsi256_ps(
      _mm256_add_epi32(_mm256_castps_si256(e), _mm256_slli_epi32(_mm256_castps_si256(t), 23)));
}
inline V pow2i(V n) {
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
}
#elif PL_INTRIN_NEON
using V = float32x4_t;
constexpr size_t kW = 4;
// gemm register tile: 6 x 4 vectors of C (24 of the 32 q registers).
constexpr int kMr = 6, kNrv = 4;
inline V zero() { return vdupq_n_f32(0.0f); }
inline V set1(float x) { return vdupq_n_f32(x); }
inline V load(const float* p) { return vld1q_f32(p); }
inline void store(float* p, V v) { vst1q_f32(p, v); }
inline V load_n(const float* p, size_t n) {
  float buf[4] = {0, 0, 0, 0};
  std::memcpy(buf, p, n * sizeof(float));
  return vld1q_f32(buf);
}
inline void store_n(float* p, V v, size_t n) {
  float buf[4];
  vst1q_f32(buf, v);
  std::memcpy(p, buf, n * sizeof(float));
}
inline V add(V a, V b) { return vaddq_f32(a, b); }
inline V sub(V a, V b) { return vsubq_f32(a, b); }
inline V mul(V a, V b) { return vmulq_f32(a, b); }
inline V fma(V a, V b, V c) { return vfmaq_f32(c, a, b); }
inline V fnma(V a, V b, V c) { return vfmsq_f32(c, a, b); }
inline V max(V a, V b) { return vmaxq_f32(a, b); }
inline V min(V a, V b) { return vminq_f32(a, b); }
inline float reduce_add(V v) { return vaddvq_f32(v); }
inline float reduce_max(V v) { return vmaxvq_f32(v); }
inline V mask_after(V v, size_t base, size_t limit, V fill) {
  if (base + kW - 1 <= limit) return v;
  const uint32x4_t idx = {0, 1, 2, 3};
  const int64_t keep = int64_t(limit) + 1 - int64_t(base);
  const uint32x4_t m = vcltq_u32(idx, vdupq_n_u32(static_cast<uint32_t>(keep < 0 ? 0 : keep)));
  return vbslq_f32(m, v, fill);
}
struct DSum {
  float64x2_t lo = vdupq_n_f64(0.0), hi = vdupq_n_f64(0.0);
  void add(V v) {
    lo = vaddq_f64(lo, vcvt_f64_f32(vget_low_f32(v)));
    hi = vaddq_f64(hi, vcvt_high_f64_f32(v));
  }
  double total() const { return vaddvq_f64(vaddq_f64(lo, hi)); }
};
inline bool all_in(V x, float lo, float hi) {
  return vminvq_u32(vandq_u32(vcgeq_f32(x, set1(lo)), vcleq_f32(x, set1(hi)))) != 0;
}
inline V add_exponent(V e, V t) {
  return vreinterpretq_f32_s32(
      vaddq_s32(vreinterpretq_s32_f32(e), vshlq_n_s32(vreinterpretq_s32_f32(t), 23)));
}
inline V pow2i(V n) {
  return vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23));
}
#endif

// The operations exp_poly.inc needs, and its e^x range reduction and polynomial.
struct ExpOps {
  static V set(float c) { return set1(c); }
  static V fma(V a, V b, V c) { return pl::PL_INTRIN_NS::fma(a, b, c); }
  static V fnma(V a, V b, V c) { return pl::PL_INTRIN_NS::fnma(a, b, c); }
  static V mul(V a, V b) { return pl::PL_INTRIN_NS::mul(a, b); }
  static V add(V a, V b) { return pl::PL_INTRIN_NS::add(a, b); }
  static V sub(V a, V b) { return pl::PL_INTRIN_NS::sub(a, b); }
};
#include "kernels/exp/exp_poly.inc"

// Any input: clamped to [-104, 89], beyond which exp is 0 / +inf in float, and 2^n applied as
// two factors 2^(n/2) 2^(n - n/2), so results near overflow and subnormal results come out right.
// Inline, not a call: a call would make the softmax loops spill their live vectors around it.
inline V exp_any_range(V x) {
  x = min(max(x, set1(kExpMin)), set1(kExpMax));
  const V shifter = set1(kExpShifter);
  const V t = exp_shift(ExpOps(), x);
  const V e = exp_reduced(ExpOps(), x, t);
  // n is an exact integer in [-150, 128]; halves rounded down / up stay in the normal range.
  const V n = sub(t, shifter);
  const V half = set1(0.5f);
  const V n1 = sub(fma(n, half, shifter), shifter);  // round(n / 2)
  const V n2 = sub(n, n1);
  return mul(mul(e, pow2i(n1)), pow2i(n2));
}

// Fast path: every lane in [-87, 88], where n is in [-126, 127] and e^r 2^n is a normal float
// (n = -126 only for x in [-87, -86.99], where e^r >= 1.39), so adding n << 23 to the bits of
// e^r is the exact product; bits(t) << 23 == n << 23 (mod 2^32), the shifter's own bits leave
// through the top. Other vectors take exp_any_range, which gives the same bits on in-range lanes
// (scaling by 2^n is exact either way), so no element depends on its neighbours.
inline V exp(V x) {
  if (__builtin_expect(!all_in(x, kExpFastMin, kExpFastMax), 0)) return exp_any_range(x);
  const V t = exp_shift(ExpOps(), x);
  return add_exponent(exp_reduced(ExpOps(), x, t), t);
}

// e^(scale x - m) with the exponent t = scale x - m carried as an exact float pair
// (t_hi, t_lo) (FMA for the product, TwoSum for the difference): rounding scale x to float alone
// would cost |t| 6e-8 relative in e^t. e^t = exp(t_hi) (1 + t_lo). Below t = -104 e^t is 0 in
// float; there t_lo is dropped (it may be NaN when scale x - m overflowed to -inf).
inline V exp_shifted(V x, V vscale, V neg_m) {
  const V p = mul(vscale, x);
  const V p_lo = fma(vscale, x, sub(zero(), p));  // exact: scale x = p + p_lo
  const V t_hi = add(p, neg_m);
  const V b = sub(t_hi, p);
  const V err = add(sub(p, sub(t_hi, b)), sub(neg_m, b));
  const V low = set1(-104.0f);
  V t_lo = add(err, p_lo);
#if PL_INTRIN_AVX512
  t_lo = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(t_hi, low, _CMP_GE_OQ), t_lo);
#elif PL_INTRIN_AVX2
  t_lo = _mm256_and_ps(_mm256_cmp_ps(t_hi, low, _CMP_GE_OQ), t_lo);
#else
  t_lo = vreinterpretq_f32_u32(vandq_u32(vcgeq_f32(t_hi, low), vreinterpretq_u32_f32(t_lo)));
#endif
  const V e = exp(max(t_hi, low));
  return fma(e, t_lo, e);
}

}  // namespace pl::PL_INTRIN_NS
