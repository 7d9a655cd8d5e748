// SPDX-License-Identifier: Apache-2.0
// gaussian.xsimd.<isa>: Philox4x32-10 + Box-Muller with xsimd batches, one translation unit per
// instruction set (kernels/common/xsimd_arch.hpp); same stream and formulas as philox.hpp, so the
// uniform words are bit-identical to every other variant.
//
// Structure-of-arrays: lane l of w0..w3 holds block j + l. xsimd 8.1 has no 32x32->64 multiply,
// so the high half of m c is assembled from four 16x16->32 products (exact in uint32):
//   c = c1 2^16 + c0, m = m1 2^16 + m0:
//   hi = c1 m1 + (c1 m0 >> 16) + (c0 m1 >> 16)
//        + (((c1 m0 & 0xFFFF) + (c0 m1 & 0xFFFF) + (c0 m0 >> 16)) >> 16).
// Box-Muller: u1 = ((a >> 8) + 1) 2^-24, r = sqrt(-2 ln u1) (xsimd::log); the angle is reduced
// exactly in integers to a quarter turn and x in [-pi/4, pi/4] with Taylor sin / cos, as in
// philox-inl.h (reducing 2 pi u2 in float instead would cost up to 8 units of 2^-24 r).

#include "kernels/common/xsimd_arch.hpp"
#include "kernels/random/philox.hpp"

namespace pl::PL_XSIMD_NS {
namespace {

constexpr size_t kGroup = 4 * kLanes;  // samples per group: kLanes blocks

// High 32 bits of c * m, lane by lane (m a constant split into m1, m0).
inline Vu mulhi(Vu c, uint32_t m) {
  const Vu mask(0xFFFFu);
  const Vu m0(m & 0xFFFFu), m1(m >> 16);
  const Vu c0 = c & mask, c1 = c >> 16;
  const Vu p00 = c0 * m0, p01 = c0 * m1, p10 = c1 * m0, p11 = c1 * m1;
  const Vu mid = (p10 & mask) + (p01 & mask) + (p00 >> 16);
  return p11 + (p10 >> 16) + (p01 >> 16) + (mid >> 16);
}

inline Vf to_float(Vu a) { return xsimd::to_float(xsimd::bitwise_cast<Vi>(a)); }  // a < 2^31

inline void box_muller(Vu a, Vu b, Vf& za, Vf& zb) {
  const Vf u1 = to_float((a >> 8) + Vu(1u)) * Vf(0x1p-24f);
  const Vf r = xsimd::sqrt(Vf(-2.0f) * xsimd::log(u1));
  const Vu b24 = b >> 8;
  const Vu q = (b24 + Vu(1u << 21)) >> 22;
  const Vf x = xsimd::to_float(xsimd::bitwise_cast<Vi>(b24 - (q << 22))) *
               Vf(static_cast<float>(1.57079632679489661923 * 0x1p-22));
  const Vf x2 = x * x;
  Vf sp = xsimd::fma(x2, Vf(1.0f / 362880.0f), Vf(-1.0f / 5040.0f));
  sp = xsimd::fma(sp, x2, Vf(1.0f / 120.0f));
  sp = xsimd::fma(sp, x2, Vf(-1.0f / 6.0f));
  const Vf sin_x = xsimd::fma(sp * x2, x, x);
  Vf cp = xsimd::fma(x2, Vf(-1.0f / 3628800.0f), Vf(1.0f / 40320.0f));
  cp = xsimd::fma(cp, x2, Vf(-1.0f / 720.0f));
  cp = xsimd::fma(cp, x2, Vf(1.0f / 24.0f));
  cp = xsimd::fma(cp, x2, Vf(-0.5f));
  const Vf cos_x = xsimd::fma(cp, x2, Vf(1.0f));
  // cos(q pi/2 + x), sin(q pi/2 + x): odd q swaps; cos flips for q in {1, 2}, sin for {2, 3}.
  const Vu odd = Vu(0u) - (q & Vu(1u));  // all ones where q is odd
  const Vu sin_u = xsimd::bitwise_cast<Vu>(sin_x), cos_u = xsimd::bitwise_cast<Vu>(cos_x);
  const Vu sign(0x80000000u);
  const Vf c =
      xsimd::bitwise_cast<Vf>(((sin_u & odd) | (cos_u & ~odd)) ^ (((q + Vu(1u)) << 30) & sign));
  const Vf s = xsimd::bitwise_cast<Vf>(((cos_u & odd) | (sin_u & ~odd)) ^ ((q << 30) & sign));
  za = r * c;
  zb = r * s;
}

// The kGroup samples of blocks j .. j + kLanes - 1, in sample order 4 (j + l) + k, to out.
inline void gaussian_group(uint64_t j, uint32_t k0, uint32_t k1, uint64_t stream, float* out) {
  alignas(64) uint32_t lo[kLanes], hi[kLanes];
  for (size_t l = 0; l < kLanes; ++l) {
    lo[l] = static_cast<uint32_t>(j + l);
    hi[l] = static_cast<uint32_t>((j + l) >> 32);
  }
  Vu w0 = Vu::load_aligned(lo), w1 = Vu::load_aligned(hi);
  Vu w2(static_cast<uint32_t>(stream)), w3(static_cast<uint32_t>(stream >> 32));
  for (int r = 0; r < philox::kRounds; ++r) {
    const Vu hi0 = mulhi(w0, philox::kM0), lo0 = w0 * Vu(philox::kM0);
    const Vu hi1 = mulhi(w2, philox::kM1), lo1 = w2 * Vu(philox::kM1);
    w0 = hi1 ^ w1 ^ Vu(k0);
    w1 = lo1;
    w2 = hi0 ^ w3 ^ Vu(k1);
    w3 = lo0;
    k0 += philox::kW0;
    k1 += philox::kW1;
  }
  Vf z0, z1, z2, z3;
  box_muller(w0, w1, z0, z1);
  box_muller(w2, w3, z2, z3);
  alignas(64) float t[4][kLanes];
  z0.store_aligned(t[0]);
  z1.store_aligned(t[1]);
  z2.store_aligned(t[2]);
  z3.store_aligned(t[3]);
  for (size_t l = 0; l < kLanes; ++l)
    for (size_t k = 0; k < 4; ++k) out[4 * l + k] = t[k][l];
}

}  // namespace

// out: n samples counter .. counter + n - 1 of the stream (seed, stream).
void Gaussian(float* out, size_t n, uint64_t seed, uint64_t stream, uint64_t counter) {
  const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  alignas(64) float buf[kGroup];
  philox::fill_groups(out, n, counter, kGroup, buf,
                      [=](uint64_t j, float* dst) { gaussian_group(j, k0, k1, stream, dst); });
}

}  // namespace pl::PL_XSIMD_NS
