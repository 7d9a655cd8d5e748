// SPDX-License-Identifier: Apache-2.0
// attention.intrin.<isa>, attention_bwd.intrin.<isa>: one head, written with the intrinsics of
// kernels/common/intrin_ops.hpp.
// Rows up to 16 vectors on AVX-512 (n <= 256), 8 elsewhere (64 on AVX2, 32 on NEON), with d_k and
// d_v whole vectors up to 128 (the Markov model's heads) take a fused path written here. K^T
// (forward) or V^T (backward) is packed once (register transposes of a whole vector square, the
// padding past n zeroed in the same stores); each tile of rows computes its scores (or dP) in
// register tiles, causal tiles only up to the vector that holds their last row's diagonal, stores
// them to P (dS) and runs the row softmax (or its backward) on them while they are in L1. Rows of
// up to 8 vectors are held in registers: vector counts are compile-time constants, each row's lane
// mask is computed once, and two rows go side by side where they fit (a row is one long chain of
// dependent steps). Longer rows (AVX-512, n = 129..256: 8-row tiles of 3-vector chunks) run the
// rows of softmax_intrin.hpp on the tile in L1 (held in registers, 16 vectors and their masks
// spilled: 1.2x slower). The products with P and dS (O = P V, dQ = dS K, dV = P^T dO,
// dK = dS^T Q) run on register tiles that read their operands in place and stop (transposed:
// start) each depth sum at the tile's diagonal; the depth goes in the GEMM's blocks (128 deep for
// its 64-column panels on AVX-512, 256 and 512 for the narrower ones: one block up to n = 128),
// each block through every row tile while its rows of B are in L1, a later block's sum added to
// the earlier ones' as the GEMM adds it. Other shapes: the intrinsics GEMM (gemm_intrin.cc) of the
// same ISA around the rows of softmax_intrin.hpp, with the causal tiles skipped by GemmTri. Both
// paths sum every product in the same order (an FMA chain over the depth index from zero within
// each of the GEMM's depth blocks, the blocks added in order; the masked terms skipped are exact
// zeros) and take the same softmax steps, so their outputs are bit-identical (test_attention.cc
// compares them bit for bit).
// Measured at n = 256, d = 64 on AVX-512 (the model's strides 3 d, one thread): the four
// products are about half the time of the forward and backward pass, the scores and dP with
// their softmax rows the other half. Against the GEMM path there: the scores read Q at its
// stride in place (the GEMM's tiles keep compile-time strides up to 96 only), the softmax rows run
// on scores still in L1, and the products read B in place instead of packing a copy per product.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/gemm/gemm_intrin.hpp"
#include "kernels/softmax/softmax_intrin.hpp"

namespace pl::PL_INTRIN_NS {

namespace {

void scale_row(float* x, size_t len, float s) {
  const V vs = set1(s);
  size_t c = 0;
  for (; c + kW <= len; c += kW) store(x + c, mul(load(x + c), vs));
  if (c < len) store_n(x + c, mul(load_n(x + c, len - c), vs), len - c);
}

// ---- The fused path for short sequences ----

// Accumulators a register tile may hold (24 of 32 vector registers, 12 of 16 on AVX2).
constexpr int kAcc = kMr * kNrv;
// The helpers of a tile are inlined into it (GCC otherwise calls some, spilling the tile).
#define PL_ATTN_INLINE inline __attribute__((always_inline))
// Rows of the scores up to 16 vectors on AVX-512 (n <= 256), 8 elsewhere (n <= 64 on AVX2, 32
// on NEON); longer rows were no faster than the GEMM path on AVX2 (n = 128: d 64 0.99x,
// d 128 1.07x the time, measured).
#if PL_INTRIN_AVX512
constexpr size_t kFusedMaxVecs = 16;
#else
constexpr size_t kFusedMaxVecs = 8;
#endif

// Rows of more vectors than this go through the softmax (and its backward) as whole rows of
// softmax_intrin.hpp, read back from L1, instead of register-held rows.
constexpr int kRegisterRowVecs = 8;
// Row tiles of the scores for rows of more vectors: 8 rows of 3-vector chunks (0.95x the time of
// 6 rows of 4; 12 rows of 2, with 12 row addresses to keep, 1.4x).
constexpr int kWideRows = 8;

constexpr int tile_rows(int vecs) {
  return kAcc / vecs > 8 ? 8 : (kAcc / vecs < 1 ? 1 : kAcc / vecs);
}

// Row tiles of the scores: as high as a register tile of min(NV, kNrv) vectors allows, or
// kWideRows for rows past kRegisterRowVecs.
constexpr int score_rows(int nv) {
  return nv > kRegisterRowVecs ? kWideRows : tile_rows(nv < kNrv ? nv : kNrv);
}

#if PL_INTRIN_AVX512
// Rows j and j + 8 of a 16 x 16 block, columns [c, c + 8), as the two halves of one vector; rows
// at or past `rows` read as zeros (the padding of K^T / V^T, with no separate fill).
PL_ATTN_INLINE V two_rows(const float* b, size_t ldb, size_t j, size_t c, size_t rows) {
  const __m256 lo = j < rows ? _mm256_loadu_ps(b + j * ldb + c) : _mm256_setzero_ps();
  const __m512d wide = _mm512_zextpd256_pd512(_mm256_castps_pd(lo));
  if (j + 8 >= rows) return _mm512_castpd_ps(wide);
  return _mm512_castpd_ps(
      _mm512_insertf64x4(wide, _mm256_castps_pd(_mm256_loadu_ps(b + (j + 8) * ldb + c)), 1));
}

// x[k] holds rows k (low half) and k + 8 (high half) of 8 columns; on return x[c] holds column c
// of all 16 rows: a transpose of 8 x 8 within each half (in-lane unpacks and shuffles, then one
// two-source permute that joins the 128-bit lanes).
PL_ATTN_INLINE void transpose_halves(V (&x)[kW / 2]) {
  V t[8], u[8];
#pragma GCC unroll 4
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm512_unpacklo_ps(x[k], x[k + 1]);
    t[k + 1] = _mm512_unpackhi_ps(x[k], x[k + 1]);
  }
#pragma GCC unroll 2
  for (int g = 0; g < 8; g += 4) {
    u[g] = _mm512_shuffle_ps(t[g], t[g + 2], 0x44);
    u[g + 1] = _mm512_shuffle_ps(t[g], t[g + 2], 0xEE);
    u[g + 2] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0x44);
    u[g + 3] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0xEE);
  }
  // u[c] (c < 4): lane 0 column c of rows 0-3, lane 1 column c + 4, lanes 2, 3 rows 8-11; u[c + 4]
  // the same for rows 4-7 and 12-15.
  const __m512i lo = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
  const __m512i hi = _mm512_setr_epi32(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    x[c] = _mm512_permutex2var_ps(u[c], lo, u[c + 4]);
    x[c + 4] = _mm512_permutex2var_ps(u[c], hi, u[c + 4]);
  }
}
#elif PL_INTRIN_AVX2
// Rows j and j + 4 of an 8 x 8 block, columns [c, c + 4), as the two halves of one vector; rows
// at or past `rows` read as zeros (the padding of K^T / V^T, with no separate fill).
PL_ATTN_INLINE V two_rows(const float* b, size_t ldb, size_t j, size_t c, size_t rows) {
  const __m128 lo = j < rows ? _mm_loadu_ps(b + j * ldb + c) : _mm_setzero_ps();
  const __m128 hi = j + 4 < rows ? _mm_loadu_ps(b + (j + 4) * ldb + c) : _mm_setzero_ps();
  return _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
}

// x[k] holds rows k (low lane) and k + 4 (high lane) of 4 columns; on return x[c] holds column c
// of all 8 rows: a 4 x 4 transpose within each 128-bit lane.
PL_ATTN_INLINE void transpose_halves(V (&x)[kW / 2]) {
  const V t0 = _mm256_unpacklo_ps(x[0], x[1]), t1 = _mm256_unpackhi_ps(x[0], x[1]);
  const V t2 = _mm256_unpacklo_ps(x[2], x[3]), t3 = _mm256_unpackhi_ps(x[2], x[3]);
  x[0] = _mm256_shuffle_ps(t0, t2, 0x44);
  x[1] = _mm256_shuffle_ps(t0, t2, 0xEE);
  x[2] = _mm256_shuffle_ps(t1, t3, 0x44);
  x[3] = _mm256_shuffle_ps(t1, t3, 0xEE);
}
#endif

#if PL_INTRIN_AVX512 || PL_INTRIN_AVX2
// bt[c * ldbt + r] = b[r * ldb + c] for c < kW and r < kW (zero for r >= rows): the block's
// columns [0, kW / 2) and [kW / 2, kW), each as kW / 2 vectors of two half rows, transposed.
PL_ATTN_INLINE void transpose_block(const float* b, size_t ldb, size_t rows, float* bt,
                                    size_t ldbt) {
  constexpr int H = int(kW / 2);
  V x[H], y[H];
#pragma GCC unroll 8
  for (int k = 0; k < H; ++k) {
    x[k] = two_rows(b, ldb, size_t(k), 0, rows);
    y[k] = two_rows(b, ldb, size_t(k), size_t(H), rows);
  }
  transpose_halves(x);
  transpose_halves(y);
#pragma GCC unroll 8
  for (int c = 0; c < H; ++c) {
    store(bt + c * ldbt, x[c]);
    store(bt + (c + H) * ldbt, y[c]);
  }
}
#endif

// bt[t * ldbt + j] = b[j * ldb + t] for t < d, j < n; zero for n <= j < ldbt. d is a multiple of
// kW (the fused path's heads). AVX-512 and AVX2: one register transpose of kW x kW per block
// (16 x 16, 8 x 8), the rows past n of the last block zeros in the same stores; NEON: 4 x 4
// blocks (its full width) after a zero fill of the padding.
void pack_transposed(const float* b, size_t ldb, size_t n, size_t d, float* bt, size_t ldbt) {
#if PL_INTRIN_NEON
  for (size_t t = 0; t < d; ++t) std::fill(bt + t * ldbt + n, bt + (t + 1) * ldbt, 0.0f);
  size_t j = 0;
  for (; j + 4 <= n; j += 4) {
    size_t t = 0;
    for (; t + 4 <= d; t += 4) transpose4x4(b + j * ldb + t, ldb, bt + t * ldbt + j, ldbt);
    for (; t < d; ++t)
      for (size_t r = 0; r < 4; ++r) bt[t * ldbt + j + r] = b[(j + r) * ldb + t];
  }
  for (; j < n; ++j)
    for (size_t t = 0; t < d; ++t) bt[t * ldbt + j] = b[j * ldb + t];
#else
  const size_t whole = n / kW * kW;
  for (size_t j = 0; j < whole; j += kW)
    for (size_t t = 0; t < d; t += kW)
      transpose_block(b + j * ldb + t, ldb, kW, bt + t * ldbt + j, ldbt);
  const size_t padded = whole < n ? whole + kW : whole;
  if (whole < n)
    for (size_t t = 0; t < d; t += kW)
      transpose_block(b + whole * ldb + t, ldb, n - whole, bt + t * ldbt + whole, ldbt);
  if (padded < ldbt)  // wider scratch rows than the rounded length (not used by the fused path)
    for (size_t t = 0; t < d; ++t) std::fill(bt + t * ldbt + padded, bt + (t + 1) * ldbt, 0.0f);
#endif
}

// c[i, 0:NB kW) = sum over p in [lo(i0), hi(i0)) of A[i, p] b[p, 0:NB kW) for the rows i0 + i,
// i < mr, of one tile; A[i, p] = a[i * lda + p] (TA false) or a[p * lda + i] (TA true), a
// pointing at the tile's first row (column). The sum runs in order from zero (as the GEMM's).
// Rows past mr repeat the last row and are not stored (no branch in the loop). ADD: c += the sum
// (a later depth block) instead of c = the sum.
template <int NB, bool TA, bool ADD>
void prod_tile(const float* a, size_t lda, const float* b, size_t ldb, size_t lo, size_t hi,
               size_t mr, float* c, size_t ldc) {
  constexpr int MR = tile_rows(NB);
  V acc[MR][NB];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NB; ++v) acc[i][v] = zero();
  const auto run = [&](auto row) {
#pragma GCC unroll 4
    for (size_t p = lo; p < hi; ++p) {
      V bv[NB];
#pragma GCC unroll 8
      for (int v = 0; v < NB; ++v) bv[v] = load(b + p * ldb + v * kW);
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        const V ai = set1(TA ? a[p * lda + row(i)] : a[row(i) * lda + p]);
#pragma GCC unroll 8
        for (int v = 0; v < NB; ++v) acc[i][v] = fma(ai, bv[v], acc[i][v]);
      }
    }
  };
  if (mr == size_t(MR))
    run([](int i) { return size_t(i); });
  else
    run([mr](int i) { return std::min<size_t>(i, mr - 1); });
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    if (size_t(i) >= mr) break;
#pragma GCC unroll 8
    for (int v = 0; v < NB; ++v)
      store(c + i * ldc + v * kW, ADD ? add(load(c + i * ldc + v * kW), acc[i][v]) : acc[i][v]);
  }
}

using ProdFn = void (*)(const float*, size_t, const float*, size_t, size_t, size_t, size_t, float*,
                        size_t);

template <bool TA, bool ADD, int... NB>
constexpr std::array<ProdFn, sizeof...(NB)> prod_table(std::integer_sequence<int, NB...>) {
  return {&prod_tile<NB + 1, TA, ADD>...};
}

// C (n x d, d a multiple of kW) = op(A) B with op(A) = A (n x n, row-major at stride n) or A^T
// and B n x d at stride ldb. Causal: op(A) is lower triangular (A = P or dS: the sum for row i
// stops after its tile's last row) or, transposed, upper triangular (it starts at the tile's
// first row).
template <bool TA>
void prod(const float* a, const float* b, size_t ldb, float* c, size_t ldc, size_t n, size_t d,
          bool causal) {
  static constexpr auto kTable = prod_table<TA, false>(std::make_integer_sequence<int, kNrv>());
  static constexpr auto kAdd = prod_table<TA, true>(std::make_integer_sequence<int, kNrv>());
  const size_t vecs = d / kW;
  for (size_t v0 = 0; v0 < vecs; v0 += kNrv) {
    const size_t nb = std::min<size_t>(kNrv, vecs - v0);
    const size_t rows = size_t(tile_rows(int(nb)));
    // Depth blocks as the GEMM's (at least 128 deep: one block up to n = 128), each block for
    // every row tile while its rows of B are in L1.
    const size_t kc = GemmDepthBlock(d, v0 * kW);
    for (size_t pc = 0; pc < n; pc += kc)
      for (size_t i0 = 0; i0 < n; i0 += rows) {
        const size_t mr = std::min(rows, n - i0);
        size_t lo = std::max(pc, TA && causal ? i0 : 0);
        size_t hi = std::min(pc + kc, !TA && causal ? i0 + mr : n);
        if (lo >= hi) {
          if (pc != 0) continue;  // nothing to add
          lo = hi = 0;            // the first block still writes C = 0
        }
        (pc == 0 ? kTable : kAdd)[nb - 1](TA ? a + i0 : a + i0 * n, n, b + v0 * kW, ldb, lo, hi, mr,
                                          c + i0 * ldc + v0 * kW, ldc);
      }
  }
}

// acc[i, 0:NVA kW) = sum over t < d of a[row(i) * lda + t] bt[t, 0:NVA kW), in order from zero.
template <int MR, int NVA>
PL_ATTN_INLINE void row_scores(const float* a, size_t lda, const float* bt, size_t ldbt, size_t d,
                               size_t mr, V (&acc)[MR][NVA]) {
  const float* ar[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    ar[i] = a + std::min<size_t>(i, mr - 1) * lda;
#pragma GCC unroll 8
    for (int v = 0; v < NVA; ++v) acc[i][v] = zero();
  }
#pragma GCC unroll 4
  for (size_t t = 0; t < d; ++t) {
    V bv[NVA];
#pragma GCC unroll 8
    for (int v = 0; v < NVA; ++v) bv[v] = load(bt + t * ldbt + v * kW);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const V ai = set1(ar[i][t]);
#pragma GCC unroll 8
      for (int v = 0; v < NVA; ++v) acc[i][v] = fma(ai, bv[v], acc[i][v]);
    }
  }
}

// Rows x + i n, i < mr, columns [V0 kW, NVA kW) (lanes past n not stored) = scale times the
// scores of rows a + i lda against bt, in register tiles of up to kNrv vectors (the tile of the
// GEMM: a whole row of scores would not fit AVX2's 16 registers).
template <int MR, int NVA, int V0 = 0>
PL_ATTN_INLINE void scores_to_rows(const float* a, size_t lda, const float* bt, size_t ldbt,
                                   size_t d, size_t mr, float scale, float* x, size_t n) {
  constexpr int CH = NVA - V0 < kAcc / MR ? NVA - V0 : kAcc / MR;
  V acc[MR][CH];
  row_scores<MR, CH>(a, lda, bt + V0 * kW, ldbt, d, mr, acc);
  const V vs = set1(scale);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    if (size_t(i) >= mr) break;
#pragma GCC unroll 8
    for (int v = 0; v < CH; ++v) {
      const size_t c = size_t(V0 + v) * kW;
      if (c >= n) break;
      if (c + kW <= n)
        store(x + i * n + c, mul(acc[i][v], vs));
      else
        store_n(x + i * n + c, mul(acc[i][v], vs), n - c);
    }
  }
  if constexpr (V0 + CH < NVA)
    scores_to_rows<MR, NVA, V0 + CH>(a, lda, bt, ldbt, d, mr, scale, x, n);
}

// Row x (n floats) = the NVA vectors y (lanes past n not stored), then zeros up to n.
template <int NVA>
PL_ATTN_INLINE void store_row(float* x, const V (&y)[NVA], size_t n) {
#pragma GCC unroll 8
  for (int v = 0; v < NVA; ++v) {
    const size_t c = size_t(v) * kW;
    if (c >= n) break;
    if (c + kW <= n)
      store(x + c, y[v]);
    else
      store_n(x + c, y[v], n - c);
  }
  for (size_t c = size_t(NVA) * kW; c < n; c += kW) {
    if (c + kW <= n)
      store(x + c, zero());
    else
      store_n(x + c, zero(), n - c);
  }
}

// Whether vector v of a row of length len goes to the second partial sum: softmax_row_fast and
// softmax_bwd_row_fast sum the pairs of whole vectors into two accumulators (even, odd) and the
// vectors after the last pair into the first; the same order here.
PL_ATTN_INLINE bool second_sum(int v, size_t len) {
  return (v & 1) && size_t(v + 1) <= len / (2 * kW) * 2;
}

// Which lanes of vector v of a row are before its length: computed once per row and vector
// (mask_after decides it again, with a branch, at every use).
#if PL_INTRIN_AVX512
using Keep = __mmask16;
PL_ATTN_INLINE Keep keep_lanes(int v, size_t len) {
  const size_t c = size_t(v) * kW;
  return first_n(len > c ? len - c : 0);
}
PL_ATTN_INLINE V select(Keep k, V x, V fill) { return _mm512_mask_blend_ps(k, fill, x); }
#elif PL_INTRIN_AVX2
using Keep = __m256;
PL_ATTN_INLINE Keep keep_lanes(int v, size_t len) {
  const size_t c = size_t(v) * kW;
  return _mm256_castsi256_ps(first_n(len > c ? std::min(len - c, kW) : 0));
}
PL_ATTN_INLINE V select(Keep k, V x, V fill) { return _mm256_blendv_ps(fill, x, k); }
#else
using Keep = uint32x4_t;
PL_ATTN_INLINE Keep keep_lanes(int v, size_t len) {
  const size_t c = size_t(v) * kW;
  const uint32x4_t idx = {0, 1, 2, 3};
  return vcltq_u32(idx, vdupq_n_u32(static_cast<uint32_t>(len > c ? std::min(len - c, kW) : 0)));
}
PL_ATTN_INLINE V select(Keep k, V x, V fill) { return vbslq_f32(k, x, fill); }
#endif

// The NVA vectors of row x (n floats: lanes past n read as zero).
template <int NVA>
PL_ATTN_INLINE void load_row(const float* x, size_t n, V (&y)[NVA]) {
#pragma GCC unroll 8
  for (int v = 0; v < NVA; ++v) {
    const size_t c = size_t(v) * kW;
    y[v] = c + kW <= n ? load(x + c) : load_n(x + c, c < n ? n - c : 0);
  }
}

// The preamble of a group of R rows (softmax_rows, softmax_bwd_rows): the NVA vectors of rows
// x + r n and, per row and vector, the lanes before the row's length len[r].
template <int NVA, int R>
PL_ATTN_INLINE void load_rows(const float* x, size_t n, const size_t (&len)[R], V (&y)[R][NVA],
                              Keep (&keep)[R][NVA]) {
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    load_row<NVA>(x + r * n, n, y[r]);
#pragma GCC unroll 8
    for (int v = 0; v < NVA; ++v) keep[r][v] = keep_lanes(v, len[r]);
  }
}

// Rows x + r n, r < R, of lengths len[r]: x[0:len) = softmax(x[0:len)) (as softmax_row_fast: the
// same steps and sums, so the same bits) or x[0:len) itself (linear), zero from len to n;
// len <= NVA kW. R rows at once: each row is a chain of dependent steps (max, reduction, exp,
// sum, reduction, reciprocal), so that independent rows side by side keep the units busy.
template <int NVA, int R>
PL_ATTN_INLINE void softmax_rows(float* x, size_t n, const size_t (&len)[R], bool linear) {
  if constexpr (NVA > kRegisterRowVecs) {
#pragma GCC unroll 1
    for (int r = 0; r < R; ++r) {
      if (!linear) softmax_row_fast(x + r * n, len[r]);
      std::fill(x + r * n + len[r], x + (r + 1) * n, 0.0f);
    }
    return;
  }
  V y[R][NVA];
  Keep keep[R][NVA];
  load_rows<NVA, R>(x, n, len, y, keep);
  if (linear) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int v = 0; v < NVA; ++v) y[r][v] = select(keep[r][v], y[r][v], zero());
      store_row<NVA>(x + r * n, y[r], n);
    }
    return;
  }
  const V neg_inf = set1(-__builtin_inff());
  V vm[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    V m = neg_inf;
#pragma GCC unroll 8
    for (int v = 0; v < NVA; ++v) m = max(m, select(keep[r][v], y[r][v], neg_inf));
    vm[r] = set1(reduce_max(m));
  }
  V inv[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    V s0 = zero(), s1 = zero();
#pragma GCC unroll 8
    for (int v = 0; v < NVA; ++v) {
      // lanes past len: e^0, then 0 (no lane sends exp down its out-of-range path)
      y[r][v] = select(keep[r][v], exp(sub(select(keep[r][v], y[r][v], vm[r]), vm[r])), zero());
      if (second_sum(v, len[r]))
        s1 = add(s1, y[r][v]);
      else
        s0 = add(s0, y[r][v]);
    }
    inv[r] = set1(1.0f / reduce_add(add(s0, s1)));
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < NVA; ++v) y[r][v] = mul(y[r][v], inv[r]);
    store_row<NVA>(x + r * n, y[r], n);
  }
}

// Rows ds + r n, r < R, of lengths len[r]: ds[0:len) = scale p .* (ds - <p, ds>) (as
// softmax_bwd_row_fast) or scale ds (linear), zero from len to n; ds holds dP on entry, p (rows
// p + r n) is zero from len on; len <= NVA kW. R rows at once, as softmax_rows.
template <int NVA, int R>
PL_ATTN_INLINE void softmax_bwd_rows(const float* p, float* ds, size_t n, const size_t (&len)[R],
                                     float scale, bool linear) {
  if constexpr (NVA > kRegisterRowVecs) {
#pragma GCC unroll 1
    for (int r = 0; r < R; ++r) {
      if (!linear)
        softmax_bwd_row_fast(p + r * n, ds + r * n, len[r], scale);
      else
        scale_row(ds + r * n, len[r], scale);
      std::fill(ds + r * n + len[r], ds + (r + 1) * n, 0.0f);
    }
    return;
  }
  const V vs = set1(scale);
  V y[R][NVA];
  Keep keep[R][NVA];
  load_rows<NVA, R>(ds, n, len, y, keep);
  if (linear) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int v = 0; v < NVA; ++v) y[r][v] = select(keep[r][v], mul(y[r][v], vs), zero());
      store_row<NVA>(ds + r * n, y[r], n);
    }
    return;
  }
  V pv[R][NVA], vdot[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    load_row<NVA>(p + r * n, len[r], pv[r]);
    V d0 = zero(), d1 = zero();
#pragma GCC unroll 8
    for (int v = 0; v < NVA; ++v) {
      // products past len are exact zeros (p is zero there): adding them changes nothing
      const V dp = select(keep[r][v], y[r][v], zero());
      if (second_sum(v, len[r]))
        d1 = fma(pv[r][v], dp, d1);
      else
        d0 = fma(pv[r][v], dp, d0);
    }
    vdot[r] = set1(reduce_add(add(d0, d1)));
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < NVA; ++v)
      y[r][v] = select(keep[r][v], mul(mul(pv[r][v], vs), sub(y[r][v], vdot[r])), zero());
    store_row<NVA>(ds + r * n, y[r], n);
  }
}

// Rows of NVA vectors go through the softmax two at a time where both fit in registers.
template <int NVA>
constexpr bool kPairs = 6 * NVA <= kAcc;

// Rows [i0, i0 + mr) of a tile in groups of R rows: two at a time where kPairs<NVA>, then one.
// rows(r, lens) gets a group's first row r and its rows' lengths (i + 1 for row i causal, else n)
// as const size_t (&)[R].
template <int NVA, typename Rows>
PL_ATTN_INLINE void row_groups(size_t i0, size_t mr, size_t n, bool causal, Rows rows) {
  const auto len = [&](size_t i) { return causal ? i + 1 : n; };
  size_t i = i0;
  const size_t end = i0 + mr;
#pragma GCC unroll 1
  for (; kPairs<NVA> && i + 2 <= end; i += 2) {
    const size_t lens[2] = {len(i), len(i + 1)};
    rows(i, lens);
  }
#pragma GCC unroll 1
  for (; i < end; ++i) {
    const size_t lens[1] = {len(i)};
    rows(i, lens);
  }
}

struct FwdArgs {
  const float* q;
  size_t ldq;
  const float* kt;  // K^T: d_k rows of ceil(n / kW) kW floats
  size_t ldkt;
  float* p;
  size_t n, d_k;
  float scale;
  bool causal, linear;
};

// Rows [i0, i0 + mr) of P: the scores of their first NVA vectors (a register tile, stored to p),
// then row by row the softmax (or the scores themselves), zero past each row's length.
template <int MR, int NVA>
void fwd_tile(const FwdArgs& f, size_t i0, size_t mr) {
  scores_to_rows<MR, NVA>(f.q + i0 * f.ldq, f.ldq, f.kt, f.ldkt, f.d_k, mr, f.scale, f.p + i0 * f.n,
                          f.n);
  row_groups<NVA>(i0, mr, f.n, f.causal, [&](size_t r, const auto& lens) {
    constexpr int R = int(std::extent_v<std::remove_reference_t<decltype(lens)>>);
    softmax_rows<NVA, R>(f.p + r * f.n, f.n, lens, f.linear);
  });
}

struct BwdArgs {
  const float* d_o;
  size_t lddo;
  const float* vt;  // V^T: d_v rows of ceil(n / kW) kW floats
  size_t ldvt;
  const float* p;
  float* ds;
  size_t n, d_v;
  float scale;
  bool causal, linear;
};

// Rows [i0, i0 + mr) of dS: dP = dO V^T of their first NVA vectors (a register tile, stored to
// ds), then row by row the softmax backward (or the scaling), zero past each row's length.
template <int MR, int NVA>
void bwd_tile(const BwdArgs& b, size_t i0, size_t mr) {
  // dP unscaled (times 1: the same bits)
  scores_to_rows<MR, NVA>(b.d_o + i0 * b.lddo, b.lddo, b.vt, b.ldvt, b.d_v, mr, 1.0f,
                          b.ds + i0 * b.n, b.n);
  row_groups<NVA>(i0, mr, b.n, b.causal, [&](size_t r, const auto& lens) {
    constexpr int R = int(std::extent_v<std::remove_reference_t<decltype(lens)>>);
    softmax_bwd_rows<NVA, R>(b.p + r * b.n, b.ds + r * b.n, b.n, lens, b.scale, b.linear);
  });
}

template <typename Args>
using TileFn = void (*)(const Args&, size_t, size_t);

template <typename Args, int MR, int... NVA>
constexpr std::array<TileFn<Args>, sizeof...(NVA)> tile_table(std::integer_sequence<int, NVA...>) {
  if constexpr (std::is_same_v<Args, FwdArgs>)
    return {&fwd_tile<MR, NVA + 1>...};
  else
    return {&bwd_tile<MR, NVA + 1>...};
}

// Causal tiles near the start hold few vectors: they go kTall rows high while a register tile of
// kTall rows holds all their vectors (AVX-512 and NEON: the first 3 vectors, 48 and 12 columns;
// AVX2: 1, 8 columns). Fewer columns past the rows' diagonals are computed, and the FMAs have
// more independent accumulators. Every element is the same sum in either tiling.
constexpr int kTall = 8;
constexpr int kTallVecs = kAcc / kTall;

// Every row tile of P (or dS) for rows of at most NV vectors; causal tiles compute the vectors
// up to their last row only.
template <int NV, typename Args>
void row_tiles(const Args& args, size_t n, bool causal) {
  static constexpr auto kTable =
      tile_table<Args, score_rows(NV)>(std::make_integer_sequence<int, NV>());
  constexpr size_t rows = size_t(score_rows(NV));
  size_t i0 = 0;
  if constexpr (score_rows(NV) < kTall && kTallVecs >= 1) {
    constexpr int kVecs = kTallVecs < NV ? kTallVecs : NV;
    static constexpr auto kTallTable =
        tile_table<Args, kTall>(std::make_integer_sequence<int, kVecs>());
    if (causal)
      for (; i0 + kTall <= n && (i0 + kTall + kW - 1) / kW <= size_t(kVecs); i0 += kTall)
        kTallTable[(i0 + kTall + kW - 1) / kW - 1](args, i0, kTall);
  }
  for (; i0 < n; i0 += rows) {
    const size_t mr = std::min(rows, n - i0), cols = causal ? i0 + mr : n;
    kTable[(cols + kW - 1) / kW - 1](args, i0, mr);
  }
}

template <typename Args>
void all_row_tiles(const Args& args, size_t n, bool causal) {
  const size_t nv = (n + kW - 1) / kW;
  if (nv <= 1) return row_tiles<1>(args, n, causal);
  if (nv <= 2) return row_tiles<2>(args, n, causal);
  if (nv <= 4) return row_tiles<4>(args, n, causal);
  if (kFusedMaxVecs <= 8 || nv <= 8) return row_tiles<8>(args, n, causal);
  row_tiles<int(kFusedMaxVecs)>(args, n, causal);
}

// The fused path: rows of at most kFusedMaxVecs vectors, heads of whole vectors up to 128 (one
// depth block of the GEMM, whose sums are then single FMA chains as here).
bool fused(size_t n, size_t d_k, size_t d_v) {
  return n <= kFusedMaxVecs * kW && d_k % kW == 0 && d_v % kW == 0 && d_k > 0 && d_v > 0 &&
         d_k <= 128 && d_v <= 128;
}

// Packed K^T or V^T: d rows of ceil(n / kW) kW floats, 64-byte aligned.
float* transposed_scratch(size_t n, size_t d, size_t& ld) {
  thread_local std::vector<float> storage;
  ld = (n + kW - 1) / kW * kW;
  if (storage.size() < d * ld + 16) storage.resize(d * ld + 16);
  return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(storage.data()) + 63) &
                                  ~uintptr_t{63});
}

}  // namespace

// q, k: n x d_k; v, o: n x d_v; p: n x n (written, kept for the backward pass).
void Attention(const float* q, size_t ldq, const float* k, size_t ldk, const float* v, size_t ldv,
               float* o, size_t ldo, float* p, size_t n, size_t d_k, size_t d_v, float scale,
               int causal, int linear) {
  if (n == 0) return;
  if (fused(n, d_k, d_v)) {
    size_t ldkt = 0;
    float* kt = transposed_scratch(n, d_k, ldkt);
    pack_transposed(k, ldk, n, d_k, kt, ldkt);
    all_row_tiles(FwdArgs{q, ldq, kt, ldkt, p, n, d_k, scale, causal != 0, linear != 0}, n,
                  causal != 0);
    prod<false>(p, v, ldv, o, ldo, n, d_v, causal != 0);  // O = P V
    return;
  }
  // S = scale Q K^T, straight into p (causal: tiles right of the diagonal skipped)
  GemmTri(causal ? kTriLowerC : kTriNone, 0, 1, n, n, d_k, scale, q, ldq, k, ldk, 0.0f, p, n);
  for (size_t r = 0; r < n; ++r) {
    const size_t len = causal ? r + 1 : n;
    if (!linear) softmax_row_fast(p + r * n, len);
    std::fill(p + r * n + len, p + (r + 1) * n, 0.0f);
  }
  // O = P V (causal: row i sums over columns up to its tile's last row only)
  GemmTri(causal ? kTriDepthUpTo : kTriNone, 0, 0, n, d_v, n, 1.0f, p, n, v, ldv, 0.0f, o, ldo);
}

// dV = P^T dO; dP = dO V^T; dS = scale P .* (dP - rowsum(P .* dP)) (or scale dP), zero where
// masked; dQ = dS K; dK = dS^T Q. scratch (n x n) holds dS. Causal: every product skips the
// tiles of the zero upper triangle of P and dS, which halves the work.
void AttentionBwd(const float* q, size_t ldq, const float* k, size_t ldk, const float* v,
                  size_t ldv, const float* p, const float* d_o, size_t lddo, float* dq, size_t lddq,
                  float* dk, size_t lddk, float* dv, size_t lddv, float* scratch, size_t n,
                  size_t d_k, size_t d_v, float scale, int causal, int linear) {
  if (n == 0) return;
  float* ds = scratch;
  if (fused(n, d_k, d_v)) {
    const bool c = causal != 0;
    prod<true>(p, d_o, lddo, dv, lddv, n, d_v, c);  // dV = P^T dO
    size_t ldvt = 0;
    float* vt = transposed_scratch(n, d_v, ldvt);
    pack_transposed(v, ldv, n, d_v, vt, ldvt);
    all_row_tiles(BwdArgs{d_o, lddo, vt, ldvt, p, ds, n, d_v, scale, c, linear != 0}, n, c);
    prod<false>(ds, k, ldk, dq, lddq, n, d_k, c);  // dQ = dS K
    prod<true>(ds, q, ldq, dk, lddk, n, d_k, c);   // dK = dS^T Q
    return;
  }
  const int lower = causal ? kTriLowerC : kTriNone;
  const int upto = causal ? kTriDepthUpTo : kTriNone;  // op(A) = P or dS: zero right of diagonal
  const int from = causal ? kTriDepthFrom : kTriNone;  // op(A) = P^T or dS^T: zero left of it
  // dV = P^T dO
  GemmTri(from, 1, 0, n, d_v, n, 1.0f, p, n, d_o, lddo, 0.0f, dv, lddv);
  // dP = dO V^T, in ds
  GemmTri(lower, 0, 1, n, n, d_v, 1.0f, d_o, lddo, v, ldv, 0.0f, ds, n);
  for (size_t r = 0; r < n; ++r) {
    const size_t len = causal ? r + 1 : n;
    if (!linear)
      softmax_bwd_row_fast(p + r * n, ds + r * n, len, scale);
    else
      scale_row(ds + r * n, len, scale);
    std::fill(ds + r * n + len, ds + (r + 1) * n, 0.0f);
  }
  // dQ = dS K;  dK = dS^T Q
  GemmTri(upto, 0, 0, n, d_k, n, 1.0f, ds, n, k, ldk, 0.0f, dq, lddq);
  GemmTri(from, 1, 0, n, d_k, n, 1.0f, ds, n, q, ldq, 0.0f, dk, lddk);
}

}  // namespace pl::PL_INTRIN_NS
