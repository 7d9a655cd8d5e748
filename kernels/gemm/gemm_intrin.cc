// SPDX-License-Identifier: Apache-2.0
// gemm.intrin.<isa>: C = alpha op(A) op(B) + beta C with a register-tiled micro-kernel, written
// with the intrinsics of kernels/common/intrin_ops.hpp. Compiled once per ISA (AVX2, AVX-512,
// NEON); the tile is kMr rows x kNrv vectors of C held in registers for the whole of k.
//   op(B) is packed once per call into column panels of NRV * kW floats (k x NRV * kW each,
//   zero-padded), so the micro-kernel's loads of B are contiguous whatever trans_b is (a
//   row-major B is read in place when it has one or two row tiles to serve, or is already one
//   panel wide and contiguous); the panel
//   width is kNrv vectors, and for the last n mod (kNrv * kW) columns the narrowest of 1, 2 or kNrv
//   vectors that holds them, the tile's rows growing as it narrows;
//   op(A) is read in place, one broadcast per (row, p), with strides that depend on trans_a
//   (a row-major A at the model's short row strides: with the stride a compile-time constant);
//   a weight gradient with few rows (at most 64) and many columns (C = A^T B, tn 32 x 128 x 512)
//   is computed as C^T = B^T A into a scratch C^T and transposed into C, with C's own depth
//   blocks, so that every element is the same sum in the same order (same bits) on wider row
//   tiles (see swap_depth_block for where it pays).
//   Tried and not kept (slower, AVX-512, d_model 128 shapes): packing op(A) = A^T per row block
//   into contiguous row tiles (0.83-0.89x on the tn products; likely the pack pass and the 48 KiB
//   packed block displace the L1-resident B panel, while the strided lines of A^T occupy only a few
//   L1 sets); prefetching the C tile (beta != 0) or the epilogue's E and C lines of the current or
//   the next tile (no gain beyond the noise, some shapes 0.9x).
// gemm_epilogue.intrin.<isa>: the same product with beta 0, and C = acc .* E or acc + E applied
// to the accumulator registers in the micro-kernel's store of the last depth block (no swap:
// the direct product has the same bits).
#include "kernels/gemm/gemm_intrin.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

namespace pl::PL_INTRIN_NS {
namespace {

// Register tiles by panel width: the widest panel (kNrv vectors, kMr rows: 24 accumulators
// where there are 32 vector registers, 12 where there are 16) for wide products, and narrower
// panels with more rows for narrow ones (the model's n = 32 outputs, attention's d = 32 heads,
// the unembedding's n = 10), so that no FMA multiplies zero padding of a too-wide panel while
// the accumulator count stays the same: NRV vectors x MR rows.
constexpr int kAcc = kMr * kNrv;
// gemm_epilogue's elementwise step at the store of the last depth block: kind 0 none, 1
// C = r .* E, 2 C = r + E, r the float the store would write; e points at the tile's E[0, 0].
struct Epi {
  int kind = 0;
  const float* e = nullptr;
  size_t lde = 0;
};
// Packed op(B) blocks up to this size (24 KiB) stay in L1 beside a row tile of A.
constexpr size_t kL1PackedFloats = 6144;
template <int NRV>
constexpr int rows_for() {
  return NRV == kNrv ? kMr : (kAcc / NRV > 12 ? 12 : kAcc / NRV);
}

// bp = op(B)[0:k, 0:n) as ceil(n / nrw) panels of k x nrw floats (panel q holds columns
// q * nrw .. + nrw, zero-padded past n).
void pack_b(int trans_b, const float* b, size_t ldb, size_t k, size_t n, size_t nrw, float* bp) {
  const size_t panels = (n + nrw - 1) / nrw;
  if (!trans_b) {  // op(B)[p, j] = b[p * ldb + j]
    // Row by row of b, all panels of a row before the next one, so that b is read as one
    // sequential stream (panel by panel would stride through it once per panel). Vector copies
    // (a libc memcpy call per row costs as much as the copy at these sizes).
    for (size_t p = 0; p < k; ++p) {
      const float* src = b + p * ldb;
      float* dst = bp + p * nrw;
      size_t j = 0;
      for (; j + kW <= n; j += kW) store(dst + j / nrw * k * nrw + j % nrw, load(src + j));
      if (j < n) {
        float* d = dst + j / nrw * k * nrw + j % nrw;
        store_n(d, load_n(src + j, n - j), n - j);
        std::fill(d + (n - j), dst + (panels - 1) * k * nrw + nrw, 0.0f);
      }
    }
    return;
  }
  // op(B)[p, j] = b[j * ldb + p]
  for (size_t q = 0; q < panels; ++q) {
    const size_t j0 = q * nrw, nr = std::min(nrw, n - j0);
    float* pq = bp + q * k * nrw;
    for (size_t p = 0; p < k; ++p) std::fill(pq + p * nrw + nr, pq + (p + 1) * nrw, 0.0f);
    size_t j = 0;
    // 4 x 4 blocks transposed in registers (rows j..j+3 of b, depths p..p+3): the element-wise
    // loop below strides through b and costs more than the micro-kernel on small products.
    for (; j + 4 <= nr; j += 4) {
      const float* src = b + (j0 + j) * ldb;
      size_t p = 0;
      for (; p + 4 <= k; p += 4) transpose4x4(src + p, ldb, pq + p * nrw + j, nrw);
      for (; p < k; ++p)
        for (size_t i = 0; i < 4; ++i) pq[p * nrw + j + i] = src[i * ldb + p];
    }
    for (; j < nr; ++j) {
      const float* src = b + (j0 + j) * ldb;
      for (size_t p = 0; p < k; ++p) pq[p * nrw + j] = src[p];
    }
  }
}

// C[0:MR, 0:nr) = alpha * op(A)[0:MR, 0:k) bp + beta C (C not read when beta == 0); bp is
// k rows of NRV * kW floats at stride ldbp (a packed panel, or B itself).
// op(A)[i, p] = a[i * lda + p] (TA false) or a[p * lda + i] (TA true).
// The depth loop is unrolled by 4 (GCC does not unroll it by itself: the loop counter and
// branch would otherwise take an issue slot per 2 * MR * NRV flops). No prefetch of the C
// tile: it cost 15-20% on the model's short-depth 12-row AVX-512 tiles (n = 32, k <= 32).
// EPI (micro_epi): the store applies ep (gemm_epilogue); micro, the plain product, keeps its
// signature and code (with a runtime test and an extra argument in every call, the k = 10 and
// n = 10 products read 5-20% slower on a loaded machine).
// LDA, when not 0, is lda as a compile-time constant (see micro_fixed_lda).
template <int MR, int NRV, bool TA, bool EPI, size_t LDA = 0>
__attribute__((always_inline)) inline void micro_impl(size_t k, const float* a, size_t lda,
                                                      const float* bp, size_t ldbp, float* c,
                                                      size_t ldc, size_t nr, float alpha,
                                                      float beta, const Epi* ep) {
  if constexpr (LDA != 0) lda = LDA;
  constexpr size_t nrw = NRV * kW;
  V acc[MR][NRV];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NRV; ++v) acc[i][v] = zero();
#pragma GCC unroll 4
  for (size_t p = 0; p < k; ++p) {
    V bv[NRV];
#pragma GCC unroll 8
    for (int v = 0; v < NRV; ++v) bv[v] = load(bp + p * ldbp + v * kW);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      const V ai = set1(TA ? a[p * lda + i] : a[i * lda + p]);
#pragma GCC unroll 8
      for (int v = 0; v < NRV; ++v) acc[i][v] = fma(ai, bv[v], acc[i][v]);
    }
  }
  if (nr == nrw && alpha == 1.0f && beta == 0.0f) {  // the common case: a plain store
    if constexpr (!EPI) {
#pragma GCC unroll 12
      for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
        for (int v = 0; v < NRV; ++v) store(c + i * ldc + v * kW, acc[i][v]);
    } else {
      // One loop per kind (op is a constant in each), E's pointer and stride in locals.
      const float* e = ep->e;
      const size_t lde = ep->lde;
      const auto store_with = [&](auto op) {
#pragma GCC unroll 12
        for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
          for (int v = 0; v < NRV; ++v)
            store(c + i * ldc + v * kW, op(acc[i][v], load(e + i * lde + v * kW)));
      };
      if (ep->kind == 1)
        store_with([](V x, V y) { return mul(x, y); });
      else
        store_with([](V x, V y) { return add(x, y); });
    }
    return;
  }
  const V va = set1(alpha), vb = set1(beta);
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int v = 0; v < NRV; ++v) {
      const size_t j = v * kW;
      if (j >= nr) break;
      float* cp = c + i * ldc + j;
      const size_t cols = nr - j;
      V r = mul(acc[i][v], va);
      if (cols >= kW) {
        if (beta != 0.0f) r = fma(vb, load(cp), r);
        if constexpr (EPI) {
          const V e = load(ep->e + i * ep->lde + j);
          r = ep->kind == 1 ? mul(r, e) : add(r, e);
        }
        store(cp, r);
      } else {
        if (beta != 0.0f) r = fma(vb, load_n(cp, cols), r);
        if constexpr (EPI) {
          const V e = load_n(ep->e + i * ep->lde + j, cols);
          r = ep->kind == 1 ? mul(r, e) : add(r, e);
        }
        store_n(cp, r, cols);
      }
    }
  }
}

template <int MR, int NRV, bool TA, size_t LDA = 0>
void micro(size_t k, const float* a, size_t lda, const float* bp, size_t ldbp, float* c, size_t ldc,
           size_t nr, float alpha, float beta) {
  micro_impl<MR, NRV, TA, false, LDA>(k, a, lda, bp, ldbp, c, ldc, nr, alpha, beta, nullptr);
}
template <int MR, int NRV, bool TA, size_t LDA = 0>
void micro_epi(size_t k, const float* a, size_t lda, const float* bp, size_t ldbp, float* c,
               size_t ldc, size_t nr, float alpha, float beta, const Epi& ep) {
  micro_impl<MR, NRV, TA, true, LDA>(k, a, lda, bp, ldbp, c, ldc, nr, alpha, beta, &ep);
}

using MicroFn = void (*)(size_t, const float*, size_t, const float*, size_t, float*, size_t, size_t,
                         float, float);
using MicroEpiFn = void (*)(size_t, const float*, size_t, const float*, size_t, float*, size_t,
                            size_t, float, float, const Epi&);

template <int NRV, bool TA, int... MR>
constexpr std::array<MicroFn, sizeof...(MR)> micro_table(std::integer_sequence<int, MR...>) {
  return {&micro<MR + 1, NRV, TA>...};
}
template <int NRV, bool TA, int... MR>
constexpr std::array<MicroEpiFn, sizeof...(MR)> micro_epi_table(std::integer_sequence<int, MR...>) {
  return {&micro_epi<MR + 1, NRV, TA>...};
}

// Row-major op(A) (TA false) at the row strides of the model's activations: the full-height
// tile and the one a row lower (the heights of an evenly split row block) with the stride a
// compile-time constant. With a run-time stride the MR row addresses each take a register
// (12 rows: spilled to the stack) and every broadcast is an indexed load; with a constant one
// they are offsets from one pointer. nullptr: no such tile. At strides of 128 and more this
// measured the same to 5% slower (AVX-512, k = 128..256), so those keep the run-time stride.
template <bool EPI, int MR, int NRV, size_t LDA>
auto micro_fixed(int mr) {
  if constexpr (EPI)
    return mr == MR ? &micro_epi<MR, NRV, false, LDA> : &micro_epi<MR - 1, NRV, false, LDA>;
  else
    return mr == MR ? &micro<MR, NRV, false, LDA> : &micro<MR - 1, NRV, false, LDA>;
}
template <bool EPI, int MR, int NRV, size_t... LDA>
auto micro_fixed_lda(int mr, size_t lda, std::index_sequence<LDA...>) {
  static_assert(MR > 1);
  std::conditional_t<EPI, MicroEpiFn, MicroFn> f = nullptr;
  ((lda == LDA ? (void)(f = micro_fixed<EPI, MR, NRV, LDA>(mr)) : (void)0), ...);
  return mr == MR || mr == MR - 1 ? f : nullptr;
}
using ModelStrides = std::index_sequence<10, 32, 64, 96>;

// The blocked product with panels of NRV vectors. tri (GemmTri) restricts it to a triangle;
// col0 is the column of C where this call's columns start.
// kc_fixed, when not 0, replaces the panel width's own depth block (the product C^T = B^T A,
// computed for a C whose blocking is that of the other panel width: see GemmTri). epi (kTriNone
// only): gemm_epilogue's step, E at C's position, applied by the last depth block's stores.
template <int NRV>
constexpr size_t depth_block() {
  return std::max<size_t>(128, 8192 / (NRV * kW));
}
template <int NRV>
void gemm_panels(int tri, size_t col0, int trans_a, int trans_b, size_t m, size_t n, size_t k,
                 float alpha, const float* a, size_t lda, const float* b, size_t ldb, float beta,
                 float* c, size_t ldc, size_t kc_fixed = 0, const Epi& epi = Epi{}) {
  constexpr int MR = rows_for<NRV>();
  constexpr size_t nrw = NRV * kW;
  static constexpr auto kMicroN = micro_table<NRV, false>(std::make_integer_sequence<int, MR>());
  static constexpr auto kMicroT = micro_table<NRV, true>(std::make_integer_sequence<int, MR>());
  static constexpr auto kMicroNE =
      micro_epi_table<NRV, false>(std::make_integer_sequence<int, MR>());
  static constexpr auto kMicroTE =
      micro_epi_table<NRV, true>(std::make_integer_sequence<int, MR>());
  std::array<MicroFn, MR> table = trans_a ? kMicroT : kMicroN;
  std::array<MicroEpiFn, MR> table_epi = trans_a ? kMicroTE : kMicroNE;
  for (int mr = MR - 1; mr <= MR && !trans_a; ++mr) {
    if (const auto f = micro_fixed_lda<false, MR, NRV>(mr, lda, ModelStrides())) table[mr - 1] = f;
    if (epi.kind != 0)
      if (const auto f = micro_fixed_lda<true, MR, NRV>(mr, lda, ModelStrides()))
        table_epi[mr - 1] = f;
  }

  const size_t panels = (n + nrw - 1) / nrw;
  // Depth blocks of kc rows of op(B): one kc x nrw panel is 32 KiB at most, so it stays in L1
  // while every row tile of a row block streams it (a k = 8192 weight gradient would otherwise
  // stream a 2 MiB panel from L3 once per row tile). Later blocks accumulate onto the first.
  const size_t KC = kc_fixed ? kc_fixed : depth_block<NRV>();
  const size_t kcmax = std::min(KC, k);
  constexpr size_t kMcRows = 96 / MR * MR;
  // 64-byte aligned, so that no load of a panel row splits across two cache lines.
  thread_local std::vector<float> storage;
  if (storage.size() < panels * kcmax * nrw + 16) storage.resize(panels * kcmax * nrw + 16);
  float* const bpack =
      reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(storage.data()) + 63) & ~uintptr_t{63});
  for (size_t pc = 0; pc < k; pc += KC) {
    const size_t kc = std::min(KC, k - pc);
    const float* bk = trans_b ? b + pc : b + pc * ldb;
    // With one or two row tiles, op(B) is read about once: packing it would cost as much as the
    // product, so full panels of a row-major B are read in place (rows at stride ldb). A
    // row-major B that is exactly one panel wide (n == ldb == nrw: the weight gradients' X at
    // d = 32 and 64 on AVX-512) already has the packed layout and is read in place too when it
    // is 64-byte aligned, or, when it is not, for up to 128 rows of C: there the copy cost up to
    // a fifth of the product (m = 32, n = 32, k = 512), while a B reused by many more row tiles
    // is worth an aligned copy (loads that split cache lines cost ~10% at m = 8192).
    const bool direct_b =
        !trans_b &&
        (m <= 2 * size_t(MR) ||
         (n == nrw && ldb == nrw && (m <= 128 || reinterpret_cast<uintptr_t>(b) % 64 == 0)));
    const size_t n_direct = direct_b ? n / nrw * nrw : 0;
    if (n_direct < n) {
      const size_t p0 = n_direct / nrw;
      pack_b(trans_b, trans_b ? bk + n_direct * ldb : bk + n_direct, ldb, kc, n - n_direct, nrw,
             bpack + p0 * kc * nrw);
    }
    const float beta_eff = pc == 0 ? beta : 1.0f;
    // The epilogue's micro-kernels for the last depth block, the plain ones before it.
    const bool with_epi = epi.kind != 0 && pc + kc >= k;
    // When the whole packed block of op(B) fits in L1 (the model's narrow products: n <= 128
    // with a short depth), each row tile of A goes through every panel while it is in L1, and
    // A is streamed from memory exactly once. Otherwise blocks of 96 rows of A (96 x kc in
    // L1/L2), panels inside them, row tiles inside the panel: each kc x nrw panel is reused by
    // every row tile of the block while it is in L1.
    const bool tile_outer = panels * kc * nrw <= kL1PackedFloats;
    const size_t mc_rows = tile_outer ? m : kMcRows;
    for (size_t ic = 0; ic < m; ic += mc_rows) {
      const size_t mc = std::min(mc_rows, m - ic);
      // The block's rows split into ceil(mc / MR) tiles of nearly equal height (m = 32: 6, 6,
      // 5, 5, 5, 5 rather than 6 x 5 + 2): a 2-row tile has too few accumulators to hide the
      // FMA latency and would cost as much time as a full one.
      const size_t tiles = (mc + MR - 1) / MR, base = mc / tiles, extra = mc % tiles;
      const auto tile = [&](size_t i0, size_t mr, size_t jp) {
        const size_t j0 = jp * nrw;
        // The depth range [lo, hi) of this block that the tile needs.
        size_t lo = 0, hi = kc;
        if (tri == kTriLowerC && col0 + j0 > i0 + mr - 1) return;  // right of the diagonal
        if (tri == kTriDepthUpTo) hi = std::min(kc, i0 + mr > pc ? i0 + mr - pc : 0);
        if (tri == kTriDepthFrom) lo = std::min(kc, i0 > pc ? i0 - pc : 0);
        if (lo >= hi) {
          if (pc != 0) return;  // nothing to add
          lo = hi = 0;          // the first block still writes C = beta C
        }
        const float* ai = trans_a ? a + (pc + lo) * lda + i0 : a + i0 * lda + pc + lo;
        const bool in_place = j0 < n_direct;
        const float* bt = in_place ? bk + j0 + lo * ldb : bpack + jp * kc * nrw + lo * nrw;
        if (with_epi)
          return table_epi[mr - 1](hi - lo, ai, lda, bt, in_place ? ldb : nrw, c + i0 * ldc + j0,
                                   ldc, std::min(nrw, n - j0), alpha, beta_eff,
                                   Epi{epi.kind, epi.e + i0 * epi.lde + j0, epi.lde});
        table[mr - 1](hi - lo, ai, lda, bt, in_place ? ldb : nrw, c + i0 * ldc + j0, ldc,
                      std::min(nrw, n - j0), alpha, beta_eff);
      };
      if (tile_outer) {
        for (size_t q = 0, i0 = ic; q < tiles; i0 += base + (q < extra), ++q)
          for (size_t jp = 0; jp < panels; ++jp) tile(i0, base + (q < extra), jp);
      } else {
        for (size_t jp = 0; jp < panels; ++jp)
          for (size_t q = 0, i0 = ic; q < tiles; i0 += base + (q < extra), ++q)
            tile(i0, base + (q < extra), jp);
      }
    }
  }
}

// The columns of C in full-width panels for the first n_main, then the narrowest panel that
// holds the rest (n = 96 on AVX-512: one 64-column and one 32-column panel instead of two
// 64-column ones); kc_fixed as in gemm_panels.
void gemm_cols(int tri, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
               const float* a, size_t lda, const float* b, size_t ldb, float beta, float* c,
               size_t ldc, size_t kc_fixed, const Epi& epi = Epi{}) {
  constexpr size_t nrw = kNrv * kW;
  const size_t n_main = n / nrw * nrw;
  if (n_main)
    gemm_panels<kNrv>(tri, 0, trans_a, trans_b, m, n_main, k, alpha, a, lda, b, ldb, beta, c, ldc,
                      kc_fixed, epi);
  const size_t rest = n - n_main;
  if (!rest) return;
  const float* br = trans_b ? b + n_main * ldb : b + n_main;
  float* cr = c + n_main;
  const Epi er = epi.kind ? Epi{epi.kind, epi.e + n_main, epi.lde} : Epi{};
  if (kNrv > 1 && rest <= kW)
    return gemm_panels<1>(tri, n_main, trans_a, trans_b, m, rest, k, alpha, a, lda, br, ldb, beta,
                          cr, ldc, kc_fixed, er);
  if (kNrv > 2 && rest <= 2 * kW)
    return gemm_panels<(kNrv > 2 ? 2 : kNrv)>(tri, n_main, trans_a, trans_b, m, rest, k, alpha, a,
                                              lda, br, ldb, beta, cr, ldc, kc_fixed, er);
  gemm_panels<kNrv>(tri, n_main, trans_a, trans_b, m, rest, k, alpha, a, lda, br, ldb, beta, cr,
                    ldc, kc_fixed, er);
}

// dst[j * ldd + i] = src[i * lds + j] for i < rows, j < cols.
void transpose(const float* src, size_t lds, size_t rows, size_t cols, float* dst, size_t ldd) {
  size_t i = 0;
  for (; i + 4 <= rows; i += 4) {
    size_t j = 0;
    for (; j + 4 <= cols; j += 4) transpose4x4(src + i * lds + j, lds, dst + j * ldd + i, ldd);
    for (; j < cols; ++j)
      for (size_t r = i; r < i + 4; ++r) dst[j * ldd + r] = src[r * lds + j];
  }
  for (; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j) dst[j * ldd + i] = src[i * lds + j];
}

// Whether a weight gradient C (m x n) = op(A) B with op(A) = A^T (k x m stored) is computed as
// C^T = B^T A: where C has few rows and many columns (tn 32 x 128 x 512: the 6-row tiles of
// 4-vector panels need op(B) packed, 128 x 128 per depth block), its transpose has many rows
// and is one narrow panel wide, A (k x m) being read in place as that panel. m must fill whole
// vectors (no zero lanes in the swapped panels) and be at most two full panels (AVX2 tn 64 x 256
// x 1024 was ~4% slower swapped; AVX-512 1.05x) and at most 64: AVX-512 tn 128 x 512 x 1024
// (d_model 128's dWproj, beta 1) ran 1.07x (alone) to 1.2x (in the step) faster direct, where
// the swapped product reads B^T at a stride of 2 KiB (lines in 2 of L1's 64 sets) and transposes
// C in and out; C must be cut into one panel width only, so that its depth blocks are those of a
// single width (returned; 0: no swap).
size_t swap_depth_block(size_t m, size_t n) {
  if (m % kW != 0 || n < 2 * m || m > std::min<size_t>(2 * kNrv * kW, 64)) return 0;
  constexpr size_t nrw = kNrv * kW;
  if (n % nrw == 0) return depth_block<kNrv>();
  if (n < nrw && kNrv > 1 && n <= kW) return depth_block<1>();
  if (n < nrw && kNrv > 2 && n <= 2 * kW) return depth_block<(kNrv > 2 ? 2 : kNrv)>();
  return 0;
}

}  // namespace

// The panel choice of gemm_cols: full kNrv-vector panels for the first n_main columns, then the
// narrowest of 1, 2 or kNrv vectors that holds the rest.
size_t GemmDepthBlock(size_t n, size_t col) {
  constexpr size_t nrw = kNrv * kW;
  const size_t n_main = n / nrw * nrw, rest = n - n_main;
  if (col < n_main) return depth_block<kNrv>();
  if (kNrv > 1 && rest <= kW) return depth_block<1>();
  if (kNrv > 2 && rest <= 2 * kW) return depth_block<(kNrv > 2 ? 2 : kNrv)>();
  return depth_block<kNrv>();
}

// GemmTri with tri = kTriNone: C (m x n) = alpha op(A) op(B) + beta C; op(A): m x k, op(B):
// k x n, all row-major.
void Gemm(int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha, const float* a,
          size_t lda, const float* b, size_t ldb, float beta, float* c, size_t ldc) {
  GemmTri(kTriNone, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// The same product on a triangle, for causal attention (attention_intrin.cc), with whole tiles
// skipped (the order of every sum is that of Gemm):
//   kTriLowerC     only C[i, j] with j <= i is needed: tiles right of the diagonal are not
//                  computed, and entries right of the diagonal are left unspecified;
//   kTriDepthUpTo  op(A)[i, p] == 0 for p > i: the sum for row i stops after its tile's last row;
//   kTriDepthFrom  op(A)[i, p] == 0 for p < i: the sum for row i starts at its tile's first row.
void GemmTri(int tri, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
             const float* a, size_t lda, const float* b, size_t ldb, float beta, float* c,
             size_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // op(A) op(B) is the zero matrix
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  // Causal scores: 64-column panels (AVX-512) would compute 3/4 of a 128 x 128 square; panels
  // of 2 vectors (12-row tiles, the same 24 accumulators) bring that near one half.
  if (tri == kTriLowerC && kNrv > 2) {
    constexpr int kNarrow = kNrv > 2 ? 2 : kNrv;
    return gemm_panels<kNarrow>(tri, 0, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                                ldc);
  }
  // C^T = B^T A in a scratch copy of C^T (read in first when beta != 0), with the depth blocks
  // of C's own panels: every element of C is the same sum, in the same order, with the same
  // alpha / beta epilogue per depth block, as in the direct product, so the bits are the same.
  if (tri == kTriNone && trans_a && !trans_b) {
    if (const size_t kc = swap_depth_block(m, n)) {
      thread_local std::vector<float> scratch;
      if (scratch.size() < n * m + 16) scratch.resize(n * m + 16);
      float* const ct = reinterpret_cast<float*>(
          (reinterpret_cast<uintptr_t>(scratch.data()) + 63) & ~uintptr_t{63});
      if (beta != 0.0f) transpose(c, ldc, m, n, ct, m);
      gemm_cols(kTriNone, 1, 0, n, m, k, alpha, b, ldb, a, lda, beta, ct, m, kc);
      transpose(ct, m, n, m, c, ldc);
      return;
    }
  }
  gemm_cols(tri, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, 0);
}

// C = (alpha op(A) op(B)) .* E (epilogue 1) or alpha op(A) op(B) + E (2), fused into the store
// of Gemm's direct product (beta 0). Gemm's C^T = B^T A path for a few-row weight gradient is
// not taken: the direct product has the same bits (see GemmTri), and E stays read in C's order.
void GemmEpilogue(int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
                  const float* a, size_t lda, const float* b, size_t ldb, int epilogue,
                  const float* e, size_t lde, float* c, size_t ldc) {
  if (m == 0 || n == 0) return;
  const int kind = epilogue == 1 ? 1 : 2;
  if (k == 0) {  // op(A) op(B) is the zero matrix
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j)
        c[i * ldc + j] = kind == 1 ? 0.0f * e[i * lde + j] : 0.0f + e[i * lde + j];
    return;
  }
  gemm_cols(kTriNone, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, 0.0f, c, ldc, 0,
            Epi{kind, e, lde});
}

}  // namespace pl::PL_INTRIN_NS
