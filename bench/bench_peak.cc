// peak/fma/<isa>: the single-core floating-point peak, measured with a loop of independent FMAs
// (12 accumulators: more than FMA latency x FMA ports on current cores, so the loop is bound by
// FMA throughput alone). The GEMM targets are quoted as a fraction of this number.
#include <benchmark/benchmark.h>

// GCC 12 warns about the _mm512_undefined_*() pass-through operands inside its own AVX-512
// reduction intrinsics (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace {

constexpr int64_t kInner = 1000;  // FMA rounds per benchmark iteration

#define PL_FMA12(fma, b, c) \
  a0 = fma(a0, b, c);       \
  a1 = fma(a1, b, c);       \
  a2 = fma(a2, b, c);       \
  a3 = fma(a3, b, c);       \
  a4 = fma(a4, b, c);       \
  a5 = fma(a5, b, c);       \
  a6 = fma(a6, b, c);       \
  a7 = fma(a7, b, c);       \
  a8 = fma(a8, b, c);       \
  a9 = fma(a9, b, c);       \
  a10 = fma(a10, b, c);     \
  a11 = fma(a11, b, c);

#if defined(__x86_64__)
__attribute__((target("avx512f"), noinline)) float fma_loop_avx512(int64_t rounds) {
  // Distinct starting values, or the compiler merges the identical chains into one.
  __m512 a0 = _mm512_set1_ps(0.10f), a1 = _mm512_set1_ps(0.11f), a2 = _mm512_set1_ps(0.12f),
         a3 = _mm512_set1_ps(0.13f), a4 = _mm512_set1_ps(0.14f), a5 = _mm512_set1_ps(0.15f),
         a6 = _mm512_set1_ps(0.16f), a7 = _mm512_set1_ps(0.17f), a8 = _mm512_set1_ps(0.18f),
         a9 = _mm512_set1_ps(0.19f), a10 = _mm512_set1_ps(0.20f), a11 = _mm512_set1_ps(0.21f);
  __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  // Opaque and volatile: the loop must not be folded at compile time, nor the call (which would
  // otherwise be a pure function) be hoisted out of the benchmark loop.
  __asm__ volatile("" : "+v"(b), "+v"(c));
  for (int64_t i = 0; i < rounds; ++i) {
    PL_FMA12(_mm512_fmadd_ps, b, c)
  }
  const __m512 s =
      _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                  _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7))),
                    _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"), noinline)) float fma_loop_avx2(int64_t rounds) {
  __m256 a0 = _mm256_set1_ps(0.10f), a1 = _mm256_set1_ps(0.11f), a2 = _mm256_set1_ps(0.12f),
         a3 = _mm256_set1_ps(0.13f), a4 = _mm256_set1_ps(0.14f), a5 = _mm256_set1_ps(0.15f),
         a6 = _mm256_set1_ps(0.16f), a7 = _mm256_set1_ps(0.17f), a8 = _mm256_set1_ps(0.18f),
         a9 = _mm256_set1_ps(0.19f), a10 = _mm256_set1_ps(0.20f), a11 = _mm256_set1_ps(0.21f);
  __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  __asm__ volatile("" : "+x"(b), "+x"(c));
  for (int64_t i = 0; i < rounds; ++i) {
    PL_FMA12(_mm256_fmadd_ps, b, c)
  }
  __m256 s =
      _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                                  _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7))),
                    _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0];
}

void BM_peak_avx512(benchmark::State& st) {
  if (!__builtin_cpu_supports("avx512f")) {
    st.SkipWithError("no AVX-512");
    return;
  }
  for (auto _ : st) benchmark::DoNotOptimize(fma_loop_avx512(kInner));
  st.counters["GFLOPS"] = benchmark::Counter(kInner * 12 * 16 * 2 * 1e-9,
                                             benchmark::Counter::kIsIterationInvariantRate);
}
void BM_peak_avx2(benchmark::State& st) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    st.SkipWithError("no AVX2/FMA");
    return;
  }
  for (auto _ : st) benchmark::DoNotOptimize(fma_loop_avx2(kInner));
  st.counters["GFLOPS"] =
      benchmark::Counter(kInner * 12 * 8 * 2 * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_peak_avx512)->Name("peak/fma/avx512");
BENCHMARK(BM_peak_avx2)->Name("peak/fma/avx2");
#elif defined(__aarch64__)
__attribute__((noinline)) float fma_loop_neon(int64_t rounds) {
  float32x4_t a0 = vdupq_n_f32(0.10f), a1 = vdupq_n_f32(0.11f), a2 = vdupq_n_f32(0.12f),
              a3 = vdupq_n_f32(0.13f), a4 = vdupq_n_f32(0.14f), a5 = vdupq_n_f32(0.15f),
              a6 = vdupq_n_f32(0.16f), a7 = vdupq_n_f32(0.17f), a8 = vdupq_n_f32(0.18f),
              a9 = vdupq_n_f32(0.19f), a10 = vdupq_n_f32(0.20f), a11 = vdupq_n_f32(0.21f);
  float32x4_t b = vdupq_n_f32(0.999999f), c = vdupq_n_f32(1e-7f);
  __asm__ volatile("" : "+w"(b), "+w"(c));
  auto fma = [](float32x4_t a, float32x4_t x, float32x4_t y) { return vfmaq_f32(y, a, x); };
  for (int64_t i = 0; i < rounds; ++i) {
    PL_FMA12(fma, b, c)
  }
  const float32x4_t s = vaddq_f32(vaddq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)),
                                            vaddq_f32(vaddq_f32(a4, a5), vaddq_f32(a6, a7))),
                                  vaddq_f32(vaddq_f32(a8, a9), vaddq_f32(a10, a11)));
  return vaddvq_f32(s);
}
void BM_peak_neon(benchmark::State& st) {
  for (auto _ : st) benchmark::DoNotOptimize(fma_loop_neon(kInner));
  st.counters["GFLOPS"] =
      benchmark::Counter(kInner * 12 * 4 * 2 * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_peak_neon)->Name("peak/fma/neon");
#endif

}  // namespace
