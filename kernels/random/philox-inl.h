// SPDX-License-Identifier: Apache-2.0
// Vectorised Philox4x32-10 and Box-Muller for Highway targets (see philox.hpp for the stream
// layout). Included after foreach_target.h by random_hwy.cc and optim_hwy.cc (sgld).
//
// A "group" is 2N consecutive Philox blocks (N = lanes of u32), two vectors of N: the counters
// are laid out structure-of-arrays (lane l of w0..w3 holds words 0..3 of block j + l), so one
// round is two 32x32->64 multiplies per vector and the outputs go to memory with
// StoreInterleaved4, which restores the sample order 4 (j + l) + k. Every sample of a target is
// computed by the same non-inlined group function, whatever its position in a call, so a range
// gives the same bits however it is split into calls (thread-count determinism).

// Per-target include guard (Highway's -inl.h convention).
#if defined(PL_KERNELS_RANDOM_PHILOX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PL_KERNELS_RANDOM_PHILOX_INL_H_
#undef PL_KERNELS_RANDOM_PHILOX_INL_H_
#else
#define PL_KERNELS_RANDOM_PHILOX_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstring>

#include "kernels/random/philox.hpp"

HWY_BEFORE_NAMESPACE();
namespace pl {
namespace HWY_NAMESPACE {
namespace rng {
namespace hn = hwy::HWY_NAMESPACE;

using DU = hn::ScalableTag<uint32_t>;
using DI = hn::ScalableTag<int32_t>;
using DF = hn::ScalableTag<float>;
using VU = hn::Vec<DU>;
using VF = hn::Vec<DF>;

// Samples per group: 2 vectors of blocks, 4 words each, 8 * Lanes(DU); kMaxGroup bounds it over
// every vector length of this target.
constexpr size_t kMaxGroup = 2 * HWY_MAX_BYTES;
HWY_INLINE size_t GroupSize() { return 8 * hn::Lanes(DU()); }

// hi, lo: the high and low 32 bits of the 64-bit products m * c, lane by lane. MulEven
// multiplies the even lanes; shifting the 64-bit view right by 32 moves the odd lanes there.
HWY_INLINE void MulHiLo(VU m, VU c, VU& hi, VU& lo) {
  const DU du;
#if HWY_TARGET == HWY_SCALAR  // one lane: no 64-bit view of a lane pair
  const uint64_t p = uint64_t{hn::GetLane(c)} * hn::GetLane(m);
  hi = hn::Set(du, static_cast<uint32_t>(p >> 32));
  lo = hn::Set(du, static_cast<uint32_t>(p));
#else
  const hn::RepartitionToWide<DU> dw;
  const auto even = hn::MulEven(c, m);
  const auto odd = hn::MulEven(hn::BitCast(du, hn::ShiftRight<32>(hn::BitCast(dw, c))), m);
  hi = hn::OddEven(hn::BitCast(du, odd), hn::BitCast(du, hn::ShiftRight<32>(even)));
  lo = hn::Mul(c, m);
#endif
}

// Counter words 0 and 1 (j lo, j hi) of blocks j .. j + N - 1.
HWY_INLINE void Counters(uint64_t j, VU& w0, VU& w1) {
  const DU du;
  const size_t N = hn::Lanes(du);
  const uint32_t jlo = static_cast<uint32_t>(j);
  if (jlo <= 0xFFFFFFFFu - (N - 1)) {
    w0 = hn::Iota(du, jlo);
    w1 = hn::Set(du, static_cast<uint32_t>(j >> 32));
  } else {  // the low word wraps inside this vector: carry into the high word lane by lane
    HWY_ALIGN uint32_t lo[HWY_MAX_BYTES / 4], hi[HWY_MAX_BYTES / 4];
    for (size_t l = 0; l < N; ++l) {
      lo[l] = static_cast<uint32_t>(j + l);
      hi[l] = static_cast<uint32_t>((j + l) >> 32);
    }
    w0 = hn::Load(du, lo);
    w1 = hn::Load(du, hi);
  }
}

// One Philox round on a vector of counters (w0..w3), key (k0, k1) broadcast.
HWY_INLINE void Round(VU m0, VU m1, VU k0, VU k1, VU& w0, VU& w1, VU& w2, VU& w3) {
  VU hi0, lo0, hi1, lo1;
  MulHiLo(m0, w0, hi0, lo0);
  MulHiLo(m1, w2, hi1, lo1);
  w0 = hn::Xor3(hi1, w1, k0);
  w1 = lo1;
  w2 = hn::Xor3(hi0, w3, k1);
  w3 = lo0;
}

// Philox blocks j .. j + 2N - 1 of the stream: word k of block j + l in lane l of ak, of block
// j + N + l in lane l of bk. Two independent vectors per round hide the multiply latency.
HWY_INLINE void Blocks(uint64_t j, uint32_t k0, uint32_t k1, uint64_t stream, VU& a0, VU& a1,
                       VU& a2, VU& a3, VU& b0, VU& b1, VU& b2, VU& b3) {
  const DU du;
  Counters(j, a0, a1);
  Counters(j + hn::Lanes(du), b0, b1);
  a2 = b2 = hn::Set(du, static_cast<uint32_t>(stream));
  a3 = b3 = hn::Set(du, static_cast<uint32_t>(stream >> 32));
  const VU m0 = hn::Set(du, philox::kM0), m1 = hn::Set(du, philox::kM1);
  for (int r = 0; r < philox::kRounds; ++r) {
    const VU kv0 = hn::Set(du, k0), kv1 = hn::Set(du, k1);
    Round(m0, m1, kv0, kv1, a0, a1, a2, a3);
    Round(m0, m1, kv0, kv1, b0, b1, b2, b3);
    k0 += philox::kW0;
    k1 += philox::kW1;
  }
}

// ln u for u in [2^-24, 1] (normal floats), without a division: u = 2^e (1 + f) with
// 1 + f in [sqrt(1/2), sqrt(2)) (adding 1 - 0x3F3504F3 to the bits carries into the exponent
// exactly when the mantissa is >= sqrt(2)), ln(1 + f) = f - f^2 / 2 + f^3 Q(f) with Q of degree 7
// fitted here (weighted least squares on the relative error, reweighted towards minimax): 0.11
// float ulp relative on that interval in exact arithmetic.
HWY_INLINE VF LogUnit(VF u) {
  const DU du;
  const DI di;
  const DF df;
  const VU bits = hn::Add(hn::BitCast(du, u), hn::Set(du, 0x3F800000u - 0x3F3504F3u));
  const VF e =
      hn::ConvertTo(df, hn::Sub(hn::BitCast(di, hn::ShiftRight<23>(bits)), hn::Set(di, 127)));
  const VF m =
      hn::BitCast(df, hn::Add(hn::And(bits, hn::Set(du, 0x7FFFFFu)), hn::Set(du, 0x3F3504F3u)));
  const VF f = hn::Sub(m, hn::Set(df, 1.0f));
  VF q = hn::MulAdd(f, hn::Set(df, -0.07634493708610535f), hn::Set(df, 0.1276157647371292f));
  q = hn::MulAdd(q, f, hn::Set(df, -0.13160184025764465f));
  q = hn::MulAdd(q, f, hn::Set(df, 0.14201758801937103f));
  q = hn::MulAdd(q, f, hn::Set(df, -0.16623356938362122f));
  q = hn::MulAdd(q, f, hn::Set(df, 0.20001226663589478f));
  q = hn::MulAdd(q, f, hn::Set(df, -0.2500081956386566f));
  q = hn::MulAdd(q, f, hn::Set(df, 0.3333333134651184f));
  const VF t = hn::MulAdd(q, f, hn::Set(df, -0.5f));  // (ln(1 + f) - f) / f^2
  const VF ln1pf = hn::MulAdd(t, hn::Mul(f, f), f);
  return hn::MulAdd(e, hn::Set(df, 0.693147180559945309f), ln1pf);
}

// Box-Muller on the word pair (a, b): (za, zb) = sqrt(-2 ln u1) (cos, sin)(2 pi u2).
// The angle is reduced exactly in integers: b >> 8 = 2^22 q + s with q the nearest quarter
// turn (0..4) and |s| <= 2^21, so x = s (pi/2) 2^-22 lies in [-pi/4, pi/4], where Taylor
// polynomials of sin (to x^9) and cos (to x^10) are accurate to 2e-9 resp. 2.1e-8; the quarter
// turns are then a swap and sign flips.
HWY_INLINE void BoxMuller(VU a, VU b, VF& za, VF& zb) {
  const DU du;
  const DI di;
  const DF df;
  const VF u1 =
      hn::Mul(hn::ConvertTo(df, hn::BitCast(di, hn::Add(hn::ShiftRight<8>(a), hn::Set(du, 1u)))),
              hn::Set(df, 0x1p-24f));
  const VF r = hn::Sqrt(hn::Mul(hn::Set(df, -2.0f), LogUnit(u1)));

  const VU b24 = hn::ShiftRight<8>(b);
  const VU q = hn::ShiftRight<22>(hn::Add(b24, hn::Set(du, 1u << 21)));
  const VF x = hn::Mul(hn::ConvertTo(df, hn::BitCast(di, hn::Sub(b24, hn::ShiftLeft<22>(q)))),
                       hn::Set(df, static_cast<float>(1.57079632679489661923 * 0x1p-22)));
  const VF x2 = hn::Mul(x, x);
  VF sp = hn::MulAdd(x2, hn::Set(df, 1.0f / 362880.0f), hn::Set(df, -1.0f / 5040.0f));
  sp = hn::MulAdd(sp, x2, hn::Set(df, 1.0f / 120.0f));
  sp = hn::MulAdd(sp, x2, hn::Set(df, -1.0f / 6.0f));
  const VF sin_x = hn::MulAdd(hn::Mul(sp, x2), x, x);
  VF cp = hn::MulAdd(x2, hn::Set(df, -1.0f / 3628800.0f), hn::Set(df, 1.0f / 40320.0f));
  cp = hn::MulAdd(cp, x2, hn::Set(df, -1.0f / 720.0f));
  cp = hn::MulAdd(cp, x2, hn::Set(df, 1.0f / 24.0f));
  cp = hn::MulAdd(cp, x2, hn::Set(df, -0.5f));
  const VF cos_x = hn::MulAdd(cp, x2, hn::Set(df, 1.0f));

  // cos(q pi/2 + x), sin(q pi/2 + x): odd q swaps; cos flips for q in {1, 2}, sin for {2, 3}.
  const auto odd = hn::RebindMask(df, hn::TestBit(q, hn::Set(du, 1u)));
  const VU sign = hn::Set(du, 0x80000000u);
  const VF c =
      hn::Xor(hn::IfThenElse(odd, sin_x, cos_x),
              hn::BitCast(df, hn::And(hn::ShiftLeft<30>(hn::Add(q, hn::Set(du, 1u))), sign)));
  const VF s = hn::Xor(hn::IfThenElse(odd, cos_x, sin_x),
                       hn::BitCast(df, hn::And(hn::ShiftLeft<30>(q), sign)));
  za = hn::Mul(r, c);
  zb = hn::Mul(r, s);
}

// The 8N uniform words of blocks j .. j + 2N - 1, in sample order, to out (unaligned).
inline HWY_NOINLINE void UniformGroup(uint64_t j, uint32_t k0, uint32_t k1, uint64_t stream,
                                      uint32_t* HWY_RESTRICT out) {
  const DU du;
  VU a0, a1, a2, a3, b0, b1, b2, b3;
  Blocks(j, k0, k1, stream, a0, a1, a2, a3, b0, b1, b2, b3);
  hn::StoreInterleaved4(a0, a1, a2, a3, du, out);
  hn::StoreInterleaved4(b0, b1, b2, b3, du, out + 4 * hn::Lanes(du));
}

// The 8N gaussian samples of blocks j .. j + 2N - 1, in sample order, to out (unaligned).
inline HWY_NOINLINE void GaussianGroup(uint64_t j, uint32_t k0, uint32_t k1, uint64_t stream,
                                       float* HWY_RESTRICT out) {
  const DF df;
  VU a0, a1, a2, a3, b0, b1, b2, b3;
  Blocks(j, k0, k1, stream, a0, a1, a2, a3, b0, b1, b2, b3);
  VF z0, z1, z2, z3;
  BoxMuller(a0, a1, z0, z1);
  BoxMuller(a2, a3, z2, z3);
  hn::StoreInterleaved4(z0, z1, z2, z3, df, out);
  BoxMuller(b0, b1, z0, z1);
  BoxMuller(b2, b3, z2, z3);
  hn::StoreInterleaved4(z0, z1, z2, z3, df, out + 4 * hn::Lanes(df));
}

// Samples counter .. counter + n - 1 through group(j, dst), one group at a time
// (philox::fill_groups).
template <typename T, class Group>
HWY_INLINE void FillGroups(T* out, size_t n, uint64_t counter, Group group) {
  HWY_ALIGN T buf[kMaxGroup];
  philox::fill_groups(out, n, counter, GroupSize(), buf, group);
}

}  // namespace rng
}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();

#endif  // include guard
