// SPDX-License-Identifier: Apache-2.0
// The ISA targets: the single list. registry.cc generates from it the declarations of every
// implementation namespace, the Highway rows of the variant registry (PL_HWY in variants.def),
// the target table (names, ranks, the implies chain) and the Highway-target -> name map.
//
//   X(isa, arch, hwy_target, hwy_namespace, rank, implies, ...)
//     isa            the name in variant names and --target ("<kernel>.hwy.<isa>")
//     arch           x86, arm or any (any: always supported, compiled on every architecture)
//     hwy_target     Highway's target bit (0: none); variants exist where HWY_TARGETS has it
//     hwy_namespace  Highway's per-target namespace (HWY_NAMESPACE of that target)
//     rank           dispatch preference (higher wins); best first within an architecture
//     implies        the next ISA down the chain that --target also allows (empty: none)
// Hand-written variants live in pl::intrin_<isa> and pl::xsimd_<isa> (see intrin_ops.hpp and
// xsimd_arch.hpp, and meson.build's isa_builds for the compiler flags of each).
#pragma once

#define PL_ISAS(X, ...)                                             \
  X(avx512dl, x86, HWY_AVX3_DL, N_AVX3_DL, 52, avx512, __VA_ARGS__) \
  X(avx512, x86, HWY_AVX3, N_AVX3, 50, avx2, __VA_ARGS__)           \
  X(avx2, x86, HWY_AVX2, N_AVX2, 40, sse4, __VA_ARGS__)             \
  X(sse4, x86, HWY_SSE4, N_SSE4, 30, ssse3, __VA_ARGS__)            \
  X(ssse3, x86, HWY_SSSE3, N_SSSE3, 25, emu128, __VA_ARGS__)        \
  X(sve2, arm, HWY_SVE2, N_SVE2, 48, sve, __VA_ARGS__)              \
  X(sve2_128, arm, HWY_SVE2_128, N_SVE2_128, 47, sve, __VA_ARGS__)  \
  X(sve256, arm, HWY_SVE_256, N_SVE_256, 46, sve, __VA_ARGS__)      \
  X(sve, arm, HWY_SVE, N_SVE, 45, neon, __VA_ARGS__)                \
  X(neon, arm, HWY_NEON, N_NEON, 40, emu128, __VA_ARGS__)           \
  X(emu128, any, HWY_EMU128, N_EMU128, 10, scalar, __VA_ARGS__)     \
  X(scalar, any, 0, N_SCALAR, 0, , __VA_ARGS__)
