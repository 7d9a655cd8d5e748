// SPDX-License-Identifier: Apache-2.0
// Highway GEMM internals shared by gemm_hwy.cc, attention_hwy.cc and posattn_hwy.cc: one copy
// per Highway target (per-target include guard, the "-inl.h" convention of Highway).
//
// C (m x n) = alpha * op(A) op(B) + beta * C, row-major, GotoBLAS-style:
//   for each column block jc (nc <= NC) and depth block pc (kc <= KC):
//     pack op(B)[pc:pc+kc, jc:jc+nc] into panels of NR = NV * lanes columns (zero padded), so
//     the micro-kernel streams one contiguous kc x NR panel that stays in L1 (a row-major B
//     exactly one panel wide, n == ldb == NR, already has that layout and is read in place
//     when it is 64-byte aligned or C has at most kInPlaceMaxRows rows: unaligned rows split
//     cache lines, which costs more than the copy once the panel serves many row tiles);
//     for each row block ic (MC rows), panel jr, row tile ir (MR rows):
//       micro-kernel: MR x NV accumulator vectors, A broadcast straight from its storage
//       (row-major or transposed, both stream sequentially), one FMA per (row, vector).
// Accumulators are named variables, not arrays, so the same source compiles for SVE.
#if defined(PHASELAB_KERNELS_GEMM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PHASELAB_KERNELS_GEMM_INL_H_
#undef PHASELAB_KERNELS_GEMM_INL_H_
#else
#define PHASELAB_KERNELS_GEMM_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "phaselab/hwy_part-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pl {
namespace HWY_NAMESPACE {
namespace gemm_detail {
namespace hn = hwy::HWY_NAMESPACE;

// Rows per micro-tile, and the widest number of accumulator vectors per row: 6 x 4 = 24
// accumulators where there are 32 vector registers (AVX-512, NEON, SVE), 6 x 2 = 12 where
// there are 16 (AVX2, SSE, emulation).
constexpr size_t kMR = 6;
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3 || \
    HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SCALAR
constexpr size_t kMaxNV = 2;
#else
constexpr size_t kMaxNV = 4;
#endif
constexpr size_t kPanelFloats = 8192;    // kc * NR: one packed B panel, 32 KiB (L1)
constexpr size_t kPackedFloats = 65536;  // kc * nc: the packed B block, 256 KiB (L2)
constexpr size_t kMC = 96;               // rows of A per block (kMC x kc from L2)
constexpr size_t kInPlaceMaxRows = 128;  // unaligned one-panel B read in place up to this m

// A growing, 64-byte aligned per-thread buffer: allocated once per thread and size class, so
// the kernels do not allocate in steady state.
struct Scratch {
  std::vector<float> storage;
  float* get(size_t n) {
    if (storage.size() < n + 16) storage.assign(n + 16, 0.f);
    const uintptr_t p = reinterpret_cast<uintptr_t>(storage.data());
    return reinterpret_cast<float*>((p + 63) & ~uintptr_t(63));
  }
};
inline float* PackBuffer(size_t n) {
  static thread_local Scratch s;
  return s.get(n);
}

// Packs op(B)[p0:p0+kc, j0:j0+nc] as ceil(nc / nr) panels, panel q holding columns
// j0 + q*nr .. +nr as kc rows of nr floats; columns past nc are zero.
inline void PackB(bool tb, const float* b, size_t ldb, size_t p0, size_t kc, size_t j0, size_t nc,
                  size_t nr, float* dst) {
  for (size_t q = 0; q * nr < nc; ++q) {
    const size_t jq = j0 + q * nr, w = std::min(nr, nc - q * nr);
    float* panel = dst + q * kc * nr;
    if (!tb) {
      // B row-major k x n: each panel row is a contiguous piece of a B row.
      for (size_t p = 0; p < kc; ++p) {
        std::memcpy(panel + p * nr, b + (p0 + p) * ldb + jq, w * sizeof(float));
        if (w < nr) std::memset(panel + p * nr + w, 0, (nr - w) * sizeof(float));
      }
    } else {
      // B stored n x k: column j of op(B) is row j of the storage; transpose it in.
      if (w < nr)
        for (size_t p = 0; p < kc; ++p)
          std::memset(panel + p * nr + w, 0, (nr - w) * sizeof(float));
      size_t c = 0;
#if HWY_TARGET != HWY_SCALAR
      // 4 x 4 blocks transposed in registers: rows c..c+3 of B, depths p..p+3.
      const hn::Full128<float> d4;
      for (; c + 4 <= w; c += 4) {
        const float* src = b + (jq + c) * ldb + p0;
        size_t p = 0;
        for (; p + 4 <= kc; p += 4) {
          const auto r0 = hn::LoadU(d4, src + p), r1 = hn::LoadU(d4, src + ldb + p),
                     r2 = hn::LoadU(d4, src + 2 * ldb + p), r3 = hn::LoadU(d4, src + 3 * ldb + p);
          const auto t0 = hn::InterleaveLower(d4, r0, r1), t1 = hn::InterleaveLower(d4, r2, r3);
          const auto t2 = hn::InterleaveUpper(d4, r0, r1), t3 = hn::InterleaveUpper(d4, r2, r3);
          float* out = panel + p * nr + c;
          hn::StoreU(hn::ConcatLowerLower(d4, t1, t0), d4, out);
          hn::StoreU(hn::ConcatUpperUpper(d4, t1, t0), d4, out + nr);
          hn::StoreU(hn::ConcatLowerLower(d4, t3, t2), d4, out + 2 * nr);
          hn::StoreU(hn::ConcatUpperUpper(d4, t3, t2), d4, out + 3 * nr);
        }
        for (; p < kc; ++p)
          for (size_t i = 0; i < 4; ++i) panel[p * nr + c + i] = src[i * ldb + p];
      }
#endif
      for (; c < w; ++c) {
        const float* src = b + (jq + c) * ldb + p0;
        for (size_t p = 0; p < kc; ++p) panel[p * nr + c] = src[p];
      }
    }
  }
}

// Stores one accumulator vector into C: c = alpha * acc + beta * c (beta == 0: c not read),
// for the first `valid` lanes.
template <class D, class V>
HWY_INLINE void StoreC(D d, V acc, V valpha, V vbeta, bool read_c, float* c, size_t valid) {
  const size_t N = hn::Lanes(d);
  if (valid >= N) {
    const V r =
        read_c ? hn::MulAdd(acc, valpha, hn::Mul(hn::LoadU(d, c), vbeta)) : hn::Mul(acc, valpha);
    hn::StoreU(r, d, c);
  } else if (valid > 0) {
    const V r = read_c ? hn::MulAdd(acc, valpha, hn::Mul(part::Load(d, c, valid), vbeta))
                       : hn::Mul(acc, valpha);
    part::Store(d, r, c, valid);
  }
}

// The micro-kernel: C[0:MR, 0:ncols] (= or +=) alpha * op(A)[0:MR, 0:kc] * panel (kc x NV*N).
// a points at op(A)(row 0, column 0) of the tile; TA: A stored transposed (element (r, p) at
// a[p * lda + r]); beta_eff == 0 means C is not read.
#define PL_GEMM_ROW(r)                                             \
  do {                                                             \
    if constexpr (MR > r) {                                        \
      const auto ar = hn::Set(d, TA ? ap[r] : a[r * lda + p]);     \
      c##r##0 = hn::MulAdd(ar, b0, c##r##0);                       \
      if constexpr (NV > 1) c##r##1 = hn::MulAdd(ar, b1, c##r##1); \
      if constexpr (NV > 2) c##r##2 = hn::MulAdd(ar, b2, c##r##2); \
      if constexpr (NV > 3) c##r##3 = hn::MulAdd(ar, b3, c##r##3); \
    }                                                              \
  } while (0)
#define PL_GEMM_STORE(r)                                                                          \
  do {                                                                                            \
    if constexpr (MR > r) {                                                                       \
      float* cr = c + r * ldc;                                                                    \
      StoreC(d, c##r##0, valpha, vbeta, read_c, cr, ncols);                                       \
      if constexpr (NV > 1)                                                                       \
        StoreC(d, c##r##1, valpha, vbeta, read_c, cr + N, ncols > N ? ncols - N : 0);             \
      if constexpr (NV > 2)                                                                       \
        StoreC(d, c##r##2, valpha, vbeta, read_c, cr + 2 * N, ncols > 2 * N ? ncols - 2 * N : 0); \
      if constexpr (NV > 3)                                                                       \
        StoreC(d, c##r##3, valpha, vbeta, read_c, cr + 3 * N, ncols > 3 * N ? ncols - 3 * N : 0); \
    }                                                                                             \
  } while (0)
#define PL_GEMM_ZERO(r) auto c##r##0 = z, c##r##1 = z, c##r##2 = z, c##r##3 = z

template <size_t MR, size_t NV, bool TA>
HWY_NOINLINE void Micro(size_t kc, const float* HWY_RESTRICT a, size_t lda,
                        const float* HWY_RESTRICT panel, float* c, size_t ldc, size_t ncols,
                        float alpha, float beta_eff) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const size_t NR = NV * N;
  const auto z = hn::Zero(d);
  PL_GEMM_ZERO(0);
  PL_GEMM_ZERO(1);
  PL_GEMM_ZERO(2);
  PL_GEMM_ZERO(3);
  PL_GEMM_ZERO(4);
  PL_GEMM_ZERO(5);
  const float* ap = a;
  for (size_t p = 0; p < kc; ++p) {
    const float* bp = panel + p * NR;
    const auto b0 = hn::LoadU(d, bp);  // unaligned: the panel may be B itself
    const auto b1 = NV > 1 ? hn::LoadU(d, bp + N) : z;
    const auto b2 = NV > 2 ? hn::LoadU(d, bp + 2 * N) : z;
    const auto b3 = NV > 3 ? hn::LoadU(d, bp + 3 * N) : z;
    PL_GEMM_ROW(0);
    PL_GEMM_ROW(1);
    PL_GEMM_ROW(2);
    PL_GEMM_ROW(3);
    PL_GEMM_ROW(4);
    PL_GEMM_ROW(5);
    if constexpr (TA) ap += lda;
  }
  const auto valpha = hn::Set(d, alpha);
  const auto vbeta = hn::Set(d, beta_eff);
  const bool read_c = beta_eff != 0.f;
  PL_GEMM_STORE(0);
  PL_GEMM_STORE(1);
  PL_GEMM_STORE(2);
  PL_GEMM_STORE(3);
  PL_GEMM_STORE(4);
  PL_GEMM_STORE(5);
  // Accumulators of rows >= MR and vectors >= NV exist but are unused in this instantiation.
  (void)c10, (void)c20, (void)c30, (void)c40, (void)c50, (void)c01, (void)c02, (void)c03;
  (void)c11, (void)c12, (void)c13, (void)c21, (void)c22, (void)c23, (void)c31, (void)c32;
  (void)c33, (void)c41, (void)c42, (void)c43, (void)c51, (void)c52, (void)c53;
  (void)ap;
}
#undef PL_GEMM_ROW
#undef PL_GEMM_STORE
#undef PL_GEMM_ZERO

template <size_t NV, bool TA>
HWY_INLINE void MicroRows(size_t mr, size_t kc, const float* a, size_t lda, const float* panel,
                          float* c, size_t ldc, size_t ncols, float alpha, float beta_eff) {
  switch (mr) {
    case 6:
      return Micro<6, NV, TA>(kc, a, lda, panel, c, ldc, ncols, alpha, beta_eff);
    case 5:
      return Micro<5, NV, TA>(kc, a, lda, panel, c, ldc, ncols, alpha, beta_eff);
    case 4:
      return Micro<4, NV, TA>(kc, a, lda, panel, c, ldc, ncols, alpha, beta_eff);
    case 3:
      return Micro<3, NV, TA>(kc, a, lda, panel, c, ldc, ncols, alpha, beta_eff);
    case 2:
      return Micro<2, NV, TA>(kc, a, lda, panel, c, ldc, ncols, alpha, beta_eff);
    default:
      return Micro<1, NV, TA>(kc, a, lda, panel, c, ldc, ncols, alpha, beta_eff);
  }
}

// C = beta * C for the degenerate cases (k == 0 or alpha == 0); beta == 0 writes zeros.
inline void ScaleC(size_t m, size_t n, float beta, float* c, size_t ldc) {
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.f ? 0.f : beta * c[i * ldc + j];
}

template <size_t NV, bool TA>
void GemmNV(bool tb, size_t m, size_t n, size_t k, float alpha, const float* a, size_t lda,
            const float* b, size_t ldb, float beta, float* c, size_t ldc) {
  const hn::ScalableTag<float> d;
  const size_t NR = NV * hn::Lanes(d);
  const size_t KC = std::max<size_t>(16, kPanelFloats / NR);
  // op(B) = B row-major with rows of exactly NR floats: every depth block is one packed panel.
  const bool b_in_place = !tb && n == NR && ldb == NR &&
                          (m <= kInPlaceMaxRows || reinterpret_cast<uintptr_t>(b) % 64 == 0);
  for (size_t pc = 0; pc < k; pc += KC) {
    const size_t kc = std::min(KC, k - pc);
    const size_t NC = std::max(NR, kPackedFloats / kc / NR * NR);
    for (size_t jc = 0; jc < n; jc += NC) {
      const size_t nc = std::min(NC, n - jc);
      const float* packed = b + pc * ldb;  // b_in_place: jc == 0, nc == NR
      if (!b_in_place) {
        float* buf = PackBuffer(kc * ((nc + NR - 1) / NR) * NR);
        PackB(tb, b, ldb, pc, kc, jc, nc, NR, buf);
        packed = buf;
      }
      // The first depth block applies beta; later ones accumulate onto it.
      const float beta_eff = pc == 0 ? beta : 1.f;
      for (size_t ic = 0; ic < m; ic += kMC) {
        const size_t mc = std::min(kMC, m - ic);
        for (size_t jr = 0; jr < nc; jr += NR) {
          const float* panel = packed + (jr / NR) * kc * NR;
          const size_t ncols = std::min(NR, nc - jr);
          for (size_t ir = ic; ir < ic + mc; ir += kMR) {
            const size_t mr = std::min(kMR, ic + mc - ir);
            const float* at = TA ? a + pc * lda + ir : a + ir * lda + pc;
            MicroRows<NV, TA>(mr, kc, at, lda, panel, c + ir * ldc + jc + jr, ldc, ncols, alpha,
                              beta_eff);
          }
        }
      }
    }
  }
}

// The entry point used by every family: picks the panel width from n (narrow problems get
// narrow panels instead of zero padding) and the A access from trans_a.
inline void Gemm(bool ta, bool tb, size_t m, size_t n, size_t k, float alpha, const float* a,
                 size_t lda, const float* b, size_t ldb, float beta, float* c, size_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0 || alpha == 0.f) return ScaleC(m, n, beta, c, ldc);
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  if (n <= N) {
    if (ta) return GemmNV<1, true>(tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return GemmNV<1, false>(tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  if (kMaxNV == 2 || n <= 2 * N) {
    if (ta) return GemmNV<2, true>(tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return GemmNV<2, false>(tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  if (ta) return GemmNV<kMaxNV, true>(tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  return GemmNV<kMaxNV, false>(tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace gemm_detail
}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();

#endif  // PHASELAB_KERNELS_GEMM_INL_H_
