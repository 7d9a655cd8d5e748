// SPDX-License-Identifier: Apache-2.0
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

// The operations exp_poly.inc needs, and its e^x range reduction and polynomial.
struct ExpOps {
  static Vf set(float c) { return Vf(c); }
  static Vf fma(Vf a, Vf b, Vf c) { return xsimd::fma(a, b, c); }
  static Vf fnma(Vf a, Vf b, Vf c) { return xsimd::fnma(a, b, c); }
  static Vf mul(Vf a, Vf b) { return a * b; }
  static Vf add(Vf a, Vf b) { return a + b; }
  static Vf sub(Vf a, Vf b) { return a - b; }
};
#include "kernels/exp/exp_poly.inc"

// exp(x) for a whole vector, <= 2 ULP against double exp where the result is a normal float.
// Written with xsimd operations rather than xsimd::exp, whose overflow threshold (88.376) sends
// exp(88.4 .. 88.72) to +inf: exp_poly.inc's reduction and polynomial, times 2^n as two factors
// 2^(n/2) 2^(n - n/2) so results near overflow and in the subnormal range come out right.
inline Vf exp_vec(Vf x) {
  x = xsimd::min(xsimd::max(x, Vf(kExpMin)), Vf(kExpMax));  // exp is 0 / inf beyond
  const Vf t = exp_shift(ExpOps(), x);
  const Vf e = exp_reduced(ExpOps(), x, t);
  // The low bits of t hold n (two's complement) as long as |n| < 2^22.
  const Vi ni = xsimd::bitwise_cast<Vi>(t) - xsimd::bitwise_cast<Vi>(Vf(kExpShifter));
  const Vi n1 = ni >> 1;  // arithmetic shift: floor(n / 2)
  const Vi n2 = ni - n1;
  const Vf s1 = xsimd::bitwise_cast<Vf>((n1 + Vi(127)) << 23);
  const Vf s2 = xsimd::bitwise_cast<Vf>((n2 + Vi(127)) << 23);
  return e * s1 * s2;
}

}  // namespace pl::PL_XSIMD_NS
