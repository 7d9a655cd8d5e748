// SPDX-License-Identifier: Apache-2.0
// gaussian.intrin.<isa>: Philox4x32-10 + Box-Muller with hand-written intrinsics (AVX2, AVX-512,
// NEON), same stream and same Box-Muller formulas as philox.hpp (uniform words bit-identical).
//
// Layout: array-of-structures. Each 128-bit lane holds one Philox block (w0, w1, w2, w3), so a
// vector holds kW / 4 consecutive blocks and its words are already in sample order. A round is
//   (lo0, hi0, lo2, hi2) = 64-bit products (M0 w0, M1 w2)     one unsigned 32x32->64 multiply
//   w' = reverse(lo0, hi0, lo2, hi2) ^ (w1, 0, w3, 0) ^ (k0, 0, k1, 0)
// = (hi2 ^ w1 ^ k0, lo2, hi0 ^ w3 ^ k1, lo0), which is Philox's round. Two vectors of blocks
// are split into the pair words a = (w0, w2) and b = (w1, w3) with one in-lane shuffle each,
// Box-Muller runs once per pair, and an in-lane unpack puts (z0, z1, z2, z3) back in order.
// No lane ever mixes data of different blocks, so every sample is computed identically wherever
// it falls in a call (determinism under any split of a range).

#include "kernels/common/intrin_ops.hpp"
#include "kernels/random/philox.hpp"

namespace pl::PL_INTRIN_NS {
namespace {

#if PL_INTRIN_AVX512
using VU = __m512i;
inline VU u_add(VU a, VU b) { return _mm512_add_epi32(a, b); }
inline VU u_xor(VU a, VU b) { return _mm512_xor_si512(a, b); }
// Blocks j .. j + kW/4 - 1: 64-bit lanes (j + l, stream).
inline VU counters(uint64_t j, uint64_t stream) {
  const __m512i base =
      _mm512_set_epi64(int64_t(stream), int64_t(j + 3), int64_t(stream), int64_t(j + 2),
                       int64_t(stream), int64_t(j + 1), int64_t(stream), int64_t(j));
  return base;
}
inline VU quad(uint32_t x0, uint32_t x1, uint32_t x2, uint32_t x3) {
  return _mm512_set4_epi32(int(x3), int(x2), int(x1), int(x0));
}
inline VU round(VU w, VU mul, VU key) {
  const VU p = _mm512_mul_epu32(w, mul);                                     // (lo0, hi0, lo2, hi2)
  const VU r = _mm512_shuffle_epi32(p, _MM_PERM_ABCD);                       // (hi2, lo2, hi0, lo0)
  return _mm512_ternarylogic_epi32(r, _mm512_srli_epi64(w, 32), key, 0x96);  // r ^ w_odd ^ key
}
// a = (w0, w2) and b = (w1, w3) of the blocks in x then y, per 128-bit lane.
inline void split_pairs(VU x, VU y, VU& a, VU& b) {
  const __m512 xf = _mm512_castsi512_ps(x), yf = _mm512_castsi512_ps(y);
  a = _mm512_castps_si512(_mm512_shuffle_ps(xf, yf, _MM_SHUFFLE(2, 0, 2, 0)));
  b = _mm512_castps_si512(_mm512_shuffle_ps(xf, yf, _MM_SHUFFLE(3, 1, 3, 1)));
}
inline void join_pairs(V za, V zb, V& x, V& y) {
  x = _mm512_unpacklo_ps(za, zb);
  y = _mm512_unpackhi_ps(za, zb);
}
inline VU u_srl8(VU a) { return _mm512_srli_epi32(a, 8); }
inline VU u_srl22(VU a) { return _mm512_srli_epi32(a, 22); }
inline VU u_srl23(VU a) { return _mm512_srli_epi32(a, 23); }
inline VU u_sll22(VU a) { return _mm512_slli_epi32(a, 22); }
inline VU u_sll30(VU a) { return _mm512_slli_epi32(a, 30); }
inline VU u_sub(VU a, VU b) { return _mm512_sub_epi32(a, b); }
inline VU u_and(VU a, VU b) { return _mm512_and_si512(a, b); }
inline VU u_or(VU a, VU b) { return _mm512_or_si512(a, b); }
inline VU u_set(uint32_t x) { return _mm512_set1_epi32(int(x)); }
inline V to_float(VU a) { return _mm512_cvtepi32_ps(a); }  // a < 2^31
inline V as_float(VU a) { return _mm512_castsi512_ps(a); }
inline VU as_u(V a) { return _mm512_castps_si512(a); }
inline V select_odd(VU q, V if_odd, V if_even) {
  return _mm512_mask_blend_ps(_mm512_test_epi32_mask(q, _mm512_set1_epi32(1)), if_even, if_odd);
}
inline V sqrt_(V a) { return _mm512_sqrt_ps(a); }
inline void store_u(float* p, V v) { _mm512_storeu_ps(p, v); }
inline V select_lt(V a, V b, V if_lt, V otherwise) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), otherwise, if_lt);
}
#elif PL_INTRIN_AVX2
using VU = __m256i;
inline VU u_add(VU a, VU b) { return _mm256_add_epi32(a, b); }
inline VU u_xor(VU a, VU b) { return _mm256_xor_si256(a, b); }
inline VU counters(uint64_t j, uint64_t stream) {
  return _mm256_set_epi64x(int64_t(stream), int64_t(j + 1), int64_t(stream), int64_t(j));
}
inline VU quad(uint32_t x0, uint32_t x1, uint32_t x2, uint32_t x3) {
  return _mm256_setr_epi32(int(x0), int(x1), int(x2), int(x3), int(x0), int(x1), int(x2), int(x3));
}
inline VU round(VU w, VU mul, VU key) {
  const VU p = _mm256_mul_epu32(w, mul);
  const VU r = _mm256_shuffle_epi32(p, _MM_SHUFFLE(0, 1, 2, 3));
  return _mm256_xor_si256(_mm256_xor_si256(r, _mm256_srli_epi64(w, 32)), key);
}
inline void split_pairs(VU x, VU y, VU& a, VU& b) {
  const __m256 xf = _mm256_castsi256_ps(x), yf = _mm256_castsi256_ps(y);
  a = _mm256_castps_si256(_mm256_shuffle_ps(xf, yf, _MM_SHUFFLE(2, 0, 2, 0)));
  b = _mm256_castps_si256(_mm256_shuffle_ps(xf, yf, _MM_SHUFFLE(3, 1, 3, 1)));
}
inline void join_pairs(V za, V zb, V& x, V& y) {
  x = _mm256_unpacklo_ps(za, zb);
  y = _mm256_unpackhi_ps(za, zb);
}
inline VU u_srl8(VU a) { return _mm256_srli_epi32(a, 8); }
inline VU u_srl22(VU a) { return _mm256_srli_epi32(a, 22); }
inline VU u_srl23(VU a) { return _mm256_srli_epi32(a, 23); }
inline VU u_sll22(VU a) { return _mm256_slli_epi32(a, 22); }
inline VU u_sll30(VU a) { return _mm256_slli_epi32(a, 30); }
inline VU u_sub(VU a, VU b) { return _mm256_sub_epi32(a, b); }
inline VU u_and(VU a, VU b) { return _mm256_and_si256(a, b); }
inline VU u_or(VU a, VU b) { return _mm256_or_si256(a, b); }
inline VU u_set(uint32_t x) { return _mm256_set1_epi32(int(x)); }
inline V to_float(VU a) { return _mm256_cvtepi32_ps(a); }
inline V as_float(VU a) { return _mm256_castsi256_ps(a); }
inline VU as_u(V a) { return _mm256_castps_si256(a); }
inline V select_odd(VU q, V if_odd, V if_even) {
  const __m256 odd = as_float(_mm256_slli_epi32(q, 31));  // sign bit = lowest bit of q
  return _mm256_blendv_ps(if_even, if_odd, odd);
}
inline V sqrt_(V a) { return _mm256_sqrt_ps(a); }
inline void store_u(float* p, V v) { _mm256_storeu_ps(p, v); }
inline V select_lt(V a, V b, V if_lt, V otherwise) {
  return _mm256_blendv_ps(otherwise, if_lt, _mm256_cmp_ps(a, b, _CMP_LT_OQ));
}
#elif PL_INTRIN_NEON
using VU = uint32x4_t;
inline VU u_add(VU a, VU b) { return vaddq_u32(a, b); }
inline VU u_xor(VU a, VU b) { return veorq_u32(a, b); }
inline VU counters(uint64_t j, uint64_t stream) {
  const uint64x2_t c = {j, stream};
  return vreinterpretq_u32_u64(c);
}
inline VU quad(uint32_t x0, uint32_t x1, uint32_t x2, uint32_t x3) {
  const uint32x4_t q = {x0, x1, x2, x3};
  return q;
}
inline VU round(VU w, VU mul, VU key) {
  // (w0, w2) x (M0, M1) -> (lo0, hi0, lo2, hi2)
  const uint32x2_t ws = vmovn_u64(vreinterpretq_u64_u32(w));
  const uint32x2_t ms = vmovn_u64(vreinterpretq_u64_u32(mul));
  const uint32x4_t p = vreinterpretq_u32_u64(vmull_u32(ws, ms));
  const uint32x4_t r = vrev64q_u32(vextq_u32(p, p, 2));  // (hi2, lo2, hi0, lo0)
  const uint32x4_t w_odd = vreinterpretq_u32_u64(vshrq_n_u64(vreinterpretq_u64_u32(w), 32));
  return veorq_u32(veorq_u32(r, w_odd), key);
}
inline void split_pairs(VU x, VU y, VU& a, VU& b) {
  a = vuzp1q_u32(x, y);
  b = vuzp2q_u32(x, y);
}
inline void join_pairs(V za, V zb, V& x, V& y) {
  x = vzip1q_f32(za, zb);
  y = vzip2q_f32(za, zb);
}
inline VU u_srl8(VU a) { return vshrq_n_u32(a, 8); }
inline VU u_srl22(VU a) { return vshrq_n_u32(a, 22); }
inline VU u_srl23(VU a) { return vshrq_n_u32(a, 23); }
inline VU u_sll22(VU a) { return vshlq_n_u32(a, 22); }
inline VU u_sll30(VU a) { return vshlq_n_u32(a, 30); }
inline VU u_sub(VU a, VU b) { return vsubq_u32(a, b); }
inline VU u_and(VU a, VU b) { return vandq_u32(a, b); }
inline VU u_or(VU a, VU b) { return vorrq_u32(a, b); }
inline VU u_set(uint32_t x) { return vdupq_n_u32(x); }
inline V to_float(VU a) { return vcvtq_f32_s32(vreinterpretq_s32_u32(a)); }
inline V as_float(VU a) { return vreinterpretq_f32_u32(a); }
inline VU as_u(V a) { return vreinterpretq_u32_f32(a); }
inline V select_odd(VU q, V if_odd, V if_even) {
  return vbslq_f32(vtstq_u32(q, vdupq_n_u32(1)), if_odd, if_even);
}
inline V sqrt_(V a) { return vsqrtq_f32(a); }
inline void store_u(float* p, V v) { vst1q_f32(p, v); }
inline V select_lt(V a, V b, V if_lt, V otherwise) {
  return vbslq_f32(vcltq_f32(a, b), if_lt, otherwise);
}
#endif

// In the primitives above, alike on every ISA.
inline V f_xor(V a, VU s) { return as_float(u_xor(as_u(a), s)); }
// exponent and mantissa of positive normal x: x = m 2^e, m in [0.5, 1)
inline V frexp_(V x, V& e) {
  const VU bits = as_u(x);
  e = to_float(u_sub(u_srl23(bits), u_set(126)));
  return as_float(u_or(u_and(bits, u_set(0x007FFFFF)), u_set(0x3F000000)));
}

constexpr size_t kBlocksPerVec = kW / 4;
constexpr size_t kGroup = 4 * kW;  // samples per group: four vectors of blocks (two pairs)

// ln x for x in (0, 1] (normal floats): Cephes logf, x = m 2^e with m in [sqrt(1/2), sqrt(2)),
// ln m = t - t^2/2 + t^3 P(t) with t = m - 1 exact, e ln 2 added in two parts.
inline V log_(V x) {
  V e;
  V m = frexp_(x, e);  // m in [0.5, 1)
  const V small = set1(0.707106781186547524f);
  // m < sqrt(1/2): t = 2m - 1, e -= 1; else t = m - 1 (both exact)
  const V t = select_lt(m, small, sub(add(m, m), set1(1.0f)), sub(m, set1(1.0f)));
  e = select_lt(m, small, sub(e, set1(1.0f)), e);
  const V z = mul(t, t);
  V p = set1(7.0376836292e-2f);
  p = fma(p, t, set1(-1.1514610310e-1f));
  p = fma(p, t, set1(1.1676998740e-1f));
  p = fma(p, t, set1(-1.2420140846e-1f));
  p = fma(p, t, set1(1.4249322787e-1f));
  p = fma(p, t, set1(-1.6668057665e-1f));
  p = fma(p, t, set1(2.0000714765e-1f));
  p = fma(p, t, set1(-2.4999993993e-1f));
  p = fma(p, t, set1(3.3333331174e-1f));
  V y = mul(mul(p, t), z);
  y = fma(e, set1(-2.12194440e-4f), y);
  y = fma(z, set1(-0.5f), y);
  return fma(e, set1(0.693359375f), add(t, y));
}

// Box-Muller on the word pairs (a, b) lane by lane (formulas of philox.hpp / philox-inl.h):
// u1 = ((a >> 8) + 1) 2^-24, r = sqrt(-2 ln u1); the angle 2 pi (b >> 8) 2^-24 reduced exactly in
// integers to a quarter turn q and x in [-pi/4, pi/4], Taylor sin (x^9) and cos (x^10).
inline void box_muller(VU a, VU b, V& za, V& zb) {
  const V u1 = mul(to_float(u_add(u_srl8(a), u_set(1))), set1(0x1p-24f));
  const V r = sqrt_(mul(set1(-2.0f), log_(u1)));
  const VU b24 = u_srl8(b);
  const VU q = u_srl22(u_add(b24, u_set(1u << 21)));
  const V x = mul(to_float(u_sub(b24, u_sll22(q))),
                  set1(static_cast<float>(1.57079632679489661923 * 0x1p-22)));
  const V x2 = mul(x, x);
  V sp = fma(x2, set1(1.0f / 362880.0f), set1(-1.0f / 5040.0f));
  sp = fma(sp, x2, set1(1.0f / 120.0f));
  sp = fma(sp, x2, set1(-1.0f / 6.0f));
  const V sin_x = fma(mul(sp, x2), x, x);
  V cp = fma(x2, set1(-1.0f / 3628800.0f), set1(1.0f / 40320.0f));
  cp = fma(cp, x2, set1(-1.0f / 720.0f));
  cp = fma(cp, x2, set1(1.0f / 24.0f));
  cp = fma(cp, x2, set1(-0.5f));
  const V cos_x = fma(cp, x2, set1(1.0f));
  // cos(q pi/2 + x), sin(q pi/2 + x): odd q swaps; cos flips for q in {1, 2}, sin for {2, 3}.
  const VU sign = u_set(0x80000000u);
  const V c = f_xor(select_odd(q, sin_x, cos_x), u_and(u_sll30(u_add(q, u_set(1))), sign));
  const V s = f_xor(select_odd(q, cos_x, sin_x), u_and(u_sll30(q), sign));
  za = mul(r, c);
  zb = mul(r, s);
}

// The kGroup samples of blocks j .. j + 4 kBlocksPerVec - 1, in order, to out. Four independent
// Philox chains per group keep the multiplier busy across the rounds' latency.
inline void gaussian_group(uint64_t j, uint32_t k0, uint32_t k1, uint64_t stream, float* out) {
  VU x[4];
  for (int g = 0; g < 4; ++g) x[g] = counters(j + g * kBlocksPerVec, stream);
  const VU mul = quad(philox::kM0, 0, philox::kM1, 0);
  VU key = quad(k0, 0, k1, 0);
  const VU bump = quad(philox::kW0, 0, philox::kW1, 0);
  for (int r = 0; r < philox::kRounds; ++r) {
    for (int g = 0; g < 4; ++g) x[g] = round(x[g], mul, key);
    key = u_add(key, bump);
  }
  for (int h = 0; h < 2; ++h) {
    VU a, b;
    split_pairs(x[2 * h], x[2 * h + 1], a, b);
    V za, zb, ox, oy;
    box_muller(a, b, za, zb);
    join_pairs(za, zb, ox, oy);
    store_u(out + 2 * h * kW, ox);
    store_u(out + (2 * h + 1) * kW, oy);
  }
}

}  // namespace

// out: n samples counter .. counter + n - 1 of the stream (seed, stream).
void Gaussian(float* out, size_t n, uint64_t seed, uint64_t stream, uint64_t counter) {
  const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  alignas(64) float buf[kGroup];
  philox::fill_groups(out, n, counter, kGroup, buf,
                      [=](uint64_t j, float* dst) { gaussian_group(j, k0, k1, stream, dst); });
}

}  // namespace pl::PL_INTRIN_NS
