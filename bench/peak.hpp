// SPDX-License-Identifier: Apache-2.0
// The single-core floating-point peak of each vector ISA, measured with a loop of independent
// FMAs: 12 accumulators, more than FMA latency x FMA ports on current cores (4 cycles x 2 ports
// on x86, 4 x 4 on Neoverse V1/V2), so the loop is bound by FMA throughput alone. Used by the
// Google Benchmark "peak/fma/<isa>" entries and by markov_step's "% of peak" column.
//
//   pl::bench::peak_isas()            the ISAs this CPU runs, widest first ("avx512", "avx2",
//                                      "sve", "neon")
//   pl::bench::fma_loop(isa, rounds)  one run of the loop: 12 * lanes(isa) FMAs per round
//   pl::bench::peak_lanes(isa)        float lanes per vector (SVE: the hardware vector length)
//   pl::bench::peak_gflops(isa, s)    FLOP/s per second of this process's CPU time, over >= s
//                                      seconds (a shared, loaded machine does not lower it)
#pragma once

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#include <sys/auxv.h>
#ifndef HWCAP_SVE
#define HWCAP_SVE (1 << 22)
#endif
#endif

namespace pl::bench {

// Twelve accumulators with distinct starting values (or the compiler merges the identical chains
// into one), then b, c kept opaque so that the loop is not folded at compile time.
#define PL_PEAK_INIT12(V, set1)                                                               \
  V a0 = set1(0.10f), a1 = set1(0.11f), a2 = set1(0.12f), a3 = set1(0.13f), a4 = set1(0.14f), \
    a5 = set1(0.15f), a6 = set1(0.16f), a7 = set1(0.17f), a8 = set1(0.18f), a9 = set1(0.19f), \
    a10 = set1(0.20f), a11 = set1(0.21f);                                                     \
  V b = set1(0.999999f), c = set1(1e-7f);
#define PL_PEAK_FMA12(fma, b, c) \
  a0 = fma(a0, b, c);            \
  a1 = fma(a1, b, c);            \
  a2 = fma(a2, b, c);            \
  a3 = fma(a3, b, c);            \
  a4 = fma(a4, b, c);            \
  a5 = fma(a5, b, c);            \
  a6 = fma(a6, b, c);            \
  a7 = fma(a7, b, c);            \
  a8 = fma(a8, b, c);            \
  a9 = fma(a9, b, c);            \
  a10 = fma(a10, b, c);          \
  a11 = fma(a11, b, c);
#define PL_PEAK_SUM12(add)                                               \
  add(add(add(add(a0, a1), add(a2, a3)), add(add(a4, a5), add(a6, a7))), \
      add(add(a8, a9), add(a10, a11)))

#if defined(__x86_64__)
__attribute__((target("avx512f"), noinline)) inline float fma_loop_avx512(int64_t rounds) {
  PL_PEAK_INIT12(__m512, _mm512_set1_ps)
  __asm__ volatile("" : "+v"(b), "+v"(c));
  for (int64_t i = 0; i < rounds; ++i) {
    PL_PEAK_FMA12(_mm512_fmadd_ps, b, c)
  }
  float lanes[16];  // (not _mm512_reduce_add_ps: GCC 12's header warns)
  _mm512_storeu_ps(lanes, PL_PEAK_SUM12(_mm512_add_ps));
  return lanes[0];
}
__attribute__((target("avx2,fma"), noinline)) inline float fma_loop_avx2(int64_t rounds) {
  PL_PEAK_INIT12(__m256, _mm256_set1_ps)
  __asm__ volatile("" : "+x"(b), "+x"(c));
  for (int64_t i = 0; i < rounds; ++i) {
    PL_PEAK_FMA12(_mm256_fmadd_ps, b, c)
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, PL_PEAK_SUM12(_mm256_add_ps));
  return lanes[0];
}
#elif defined(__aarch64__)
__attribute__((noinline)) inline float fma_loop_neon(int64_t rounds) {
  PL_PEAK_INIT12(float32x4_t, vdupq_n_f32)
  __asm__ volatile("" : "+w"(b), "+w"(c));
  auto fma = [](float32x4_t a, float32x4_t x, float32x4_t y) { return vfmaq_f32(y, a, x); };
  for (int64_t i = 0; i < rounds; ++i) {
    PL_PEAK_FMA12(fma, b, c)
  }
  return vaddvq_f32(PL_PEAK_SUM12(vaddq_f32));
}
// SVE at the hardware vector length, written in inline assembly so that no SVE header or
// compiler flag is needed (the function only runs where HWCAP_SVE says the CPU has SVE).
__attribute__((noinline)) inline float fma_loop_sve(int64_t rounds) {
  float out = 0;
  if (rounds <= 0) return out;
  __asm__ volatile(
      ".arch_extension sve\n"
      "ptrue p0.s\n"
      "fdup z0.s, #0.5\n"
      "fdup z1.s, #0.5\n"
      "fdup z2.s, #1.0\n"
      "fdup z3.s, #1.5\n"
      "fdup z4.s, #2.0\n"
      "fdup z5.s, #2.5\n"
      "fdup z6.s, #3.0\n"
      "fdup z7.s, #3.5\n"
      "fdup z8.s, #4.0\n"
      "fdup z9.s, #4.5\n"
      "fdup z10.s, #5.0\n"
      "fdup z11.s, #5.5\n"
      "fdup z12.s, #0.5\n"
      "fdup z13.s, #0.125\n"
      "mov x9, %[n]\n"
      "1:\n"
      "fmla z0.s, p0/m, z12.s, z13.s\n"
      "fmla z1.s, p0/m, z12.s, z13.s\n"
      "fmla z2.s, p0/m, z12.s, z13.s\n"
      "fmla z3.s, p0/m, z12.s, z13.s\n"
      "fmla z4.s, p0/m, z12.s, z13.s\n"
      "fmla z5.s, p0/m, z12.s, z13.s\n"
      "fmla z6.s, p0/m, z12.s, z13.s\n"
      "fmla z7.s, p0/m, z12.s, z13.s\n"
      "fmla z8.s, p0/m, z12.s, z13.s\n"
      "fmla z9.s, p0/m, z12.s, z13.s\n"
      "fmla z10.s, p0/m, z12.s, z13.s\n"
      "fmla z11.s, p0/m, z12.s, z13.s\n"
      "subs x9, x9, #1\n"
      "b.ne 1b\n"
      "fadd z0.s, z0.s, z11.s\n"
      "faddv s0, p0, z0.s\n"
      "fmov %w[o], s0\n"
      : [o] "=r"(out)
      : [n] "r"(rounds)
      : "x9", "p0", "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12",
        "v13", "cc", "memory");
  return out;
}
inline int sve_lanes() {
  uint64_t n = 0;
  __asm__ volatile(".arch_extension sve\ncntw %0" : "=r"(n));
  return int(n);
}
#endif

inline std::vector<std::string> peak_isas() {
  std::vector<std::string> v;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) v.push_back("avx512");
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) v.push_back("avx2");
#elif defined(__aarch64__)
  if (getauxval(AT_HWCAP) & HWCAP_SVE) v.push_back("sve");
  v.push_back("neon");
#endif
  return v;
}

inline int peak_lanes(const std::string& isa) {
  if (isa == "avx512") return 16;
  if (isa == "avx2") return 8;
  if (isa == "neon") return 4;
#if defined(__aarch64__)
  if (isa == "sve") return sve_lanes();
#endif
  return 0;
}

// One run of the loop of `isa` (which must be in peak_isas()); returns a value to sink.
inline float fma_loop(const std::string& isa, int64_t rounds) {
#if defined(__x86_64__)
  if (isa == "avx512") return fma_loop_avx512(rounds);
  if (isa == "avx2") return fma_loop_avx2(rounds);
#elif defined(__aarch64__)
  if (isa == "sve") return fma_loop_sve(rounds);
  if (isa == "neon") return fma_loop_neon(rounds);
#endif
  (void)rounds;
  return 0;
}

inline double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// FLOP/s of `isa`'s loop per second of process CPU time, run for at least `seconds`; 0 when the
// CPU lacks the ISA.
inline double peak_gflops(const std::string& isa, double seconds) {
  bool have = false;
  for (const auto& s : peak_isas()) have |= s == isa;
  if (!have) return 0;
  constexpr int64_t kRounds = 100000;
  float sink = 0;
  const double t0 = process_cpu_seconds();
  int64_t rounds = 0;
  double el = 0;
  do {
    sink += fma_loop(isa, kRounds);
    rounds += kRounds;
    el = process_cpu_seconds() - t0;
  } while (el < seconds);
  if (sink == 12345.f) std::puts("");
  return double(rounds) * 12 * peak_lanes(isa) * 2 / el * 1e-9;
}

#undef PL_PEAK_INIT12
#undef PL_PEAK_FMA12
#undef PL_PEAK_SUM12

}  // namespace pl::bench
