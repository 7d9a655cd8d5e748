// xsimd 8.1 set-up shared by the xsimd variants. Each *_xsimd.cc file is compiled once per
// instruction set (meson.build's isa_builds, each with only that ISA's flags); this header picks
// the xsimd architecture and the pl::xsimd_<isa> namespace from the flags of the translation unit
// being compiled.
#pragma once

#include <cstddef>
#include <xsimd/xsimd.hpp>

#if defined(__AVX512F__) && defined(__AVX512BW__)
#define PL_XSIMD_NS xsimd_avx512
namespace pl::xsimd_avx512 {
using Arch = xsimd::avx512bw;
}
#elif defined(__AVX2__) && defined(__FMA__)
#define PL_XSIMD_NS xsimd_avx2
namespace pl::xsimd_avx2 {
using Arch = xsimd::fma3<xsimd::avx2>;
}
#elif defined(__aarch64__)
#define PL_XSIMD_NS xsimd_neon
namespace pl::xsimd_neon {
using Arch = xsimd::neon64;
}
#else
#error "xsimd variants are compiled only for AVX2, AVX-512 and aarch64 NEON"
#endif

namespace pl::PL_XSIMD_NS {

using Vf = xsimd::batch<float, Arch>;
using Vu = xsimd::batch<uint32_t, Arch>;
using Vi = xsimd::batch<int32_t, Arch>;
constexpr size_t kLanes = Vf::size;

// exp(x) for a whole vector, <= 2 ULP against double exp where the result is a normal float.
// Written with xsimd operations rather than xsimd::exp, whose overflow threshold (88.376) sends
// exp(88.4 .. 88.72) to +inf. n = round(x / ln 2) by the 1.5 * 2^23 trick, r = x - n ln 2 in two
// parts (Cody-Waite), exp(r) = 1 + r + r^2 P(r) (Cephes coefficients), times 2^n as two factors
// 2^(n/2) 2^(n - n/2) so results near overflow and in the subnormal range come out right.
inline Vf exp_vec(Vf x) {
  x = xsimd::min(xsimd::max(x, Vf(-104.0f)), Vf(89.0f));  // exp is 0 / inf beyond
  const Vf shifter(12582912.0f);                          // 1.5 * 2^23
  const Vf t = xsimd::fma(x, Vf(1.44269504088896341f), shifter);
  const Vf n = t - shifter;
  Vf r = xsimd::fnma(n, Vf(0.693359375f), x);  // ln 2 = 0.693359375 - 2.12194440e-4
  r = xsimd::fnma(n, Vf(-2.12194440e-4f), r);
  Vf p(1.9875691500e-4f);
  p = xsimd::fma(p, r, Vf(1.3981999507e-3f));
  p = xsimd::fma(p, r, Vf(8.3334519073e-3f));
  p = xsimd::fma(p, r, Vf(4.1665795894e-2f));
  p = xsimd::fma(p, r, Vf(1.6666665459e-1f));
  p = xsimd::fma(p, r, Vf(5.0000001201e-1f));
  const Vf e = xsimd::fma(p, r * r, r) + Vf(1.0f);
  // The low bits of t hold n (two's complement) as long as |n| < 2^22.
  const Vi ni = xsimd::bitwise_cast<Vi>(t) - xsimd::bitwise_cast<Vi>(shifter);
  const Vi n1 = ni >> 1;  // arithmetic shift: floor(n / 2)
  const Vi n2 = ni - n1;
  const Vf s1 = xsimd::bitwise_cast<Vf>((n1 + Vi(127)) << 23);
  const Vf s2 = xsimd::bitwise_cast<Vf>((n2 + Vi(127)) << 23);
  return e * s1 * s2;
}

}  // namespace pl::PL_XSIMD_NS
