// SPDX-License-Identifier: Apache-2.0
// gemm.hwy.<isa>, gemm_batched.hwy.<isa>: the register-blocked GEMM of gemm-inl.h, all targets.
// gemm_epilogue.hwy.<isa>: that GEMM, then the epilogue in one vector pass over C (not fused: the
// intrinsics variants apply it in the micro-kernel's store).
// foreach_target.h must follow HWY_TARGET_INCLUDE and precede the other includes.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gemm/gemm_hwy.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/gemm/gemm-inl.h"
#include "phaselab/hwy_part-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace pl {
namespace HWY_NAMESPACE {

// C (m x n) = alpha * op(A) (m x k) op(B) (k x n) + beta * C
void Gemm(int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha, const float* a,
          size_t lda, const float* b, size_t ldb, float beta, float* c, size_t ldc) {
  gemm_detail::Gemm(trans_a != 0, trans_b != 0, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

namespace {
namespace hn = hwy::HWY_NAMESPACE;
}  // namespace

// C = (alpha op(A) op(B)) .* E (epilogue 1) or alpha op(A) op(B) + E (2): Gemm's store, then one
// multiply or add per element, row by row.
void GemmEpilogue(int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
                  const float* a, size_t lda, const float* b, size_t ldb, int epilogue,
                  const float* e, size_t lde, float* c, size_t ldc) {
  gemm_detail::Gemm(trans_a != 0, trans_b != 0, m, n, k, alpha, a, lda, b, ldb, 0.f, c, ldc);
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  for (size_t i = 0; i < m; ++i) {
    float* ci = c + i * ldc;
    const float* ei = e + i * lde;
    size_t j = 0;
    for (; j + L <= n; j += L) {
      const auto x = hn::LoadU(d, ci + j), y = hn::LoadU(d, ei + j);
      hn::StoreU(epilogue == 1 ? hn::Mul(x, y) : hn::Add(x, y), d, ci + j);
    }
    for (; j < n; ++j) ci[j] = epilogue == 1 ? ci[j] * ei[j] : ci[j] + ei[j];
  }
}

namespace {

// One small problem with n <= Lanes(d) (d: a capped tag, 4 or 8 lanes): each row of C is one
// vector, C[i, :] = sum_p A[i, p] B[p, :], rows eight at a time (eight independent FMA chains
// hide the FMA latency). No packing or blocking: at these sizes (k x n of B <= 8 KiB) the
// general path's packing, zero padding and partial-tile stores cost more than the arithmetic.
// bp: k rows of Lanes(d) floats at stride ldbp (B itself when it already has that shape, else
// a zero-padded copy).
#define PL_SMALL_ROW(r)                                                                          \
  do {                                                                                           \
    if constexpr (R > r)                                                                         \
      c##r = hn::MulAdd(hn::Set(d, TA ? a[p * lda + i0 + r] : a[(i0 + r) * lda + p]), bv, c##r); \
  } while (0)
#define PL_SMALL_STORE(r)                                                                    \
  if constexpr (R > r) {                                                                     \
    float* cr = c + (i0 + r) * ldc;                                                          \
    auto out = hn::Mul(c##r, va);                                                            \
    if (read_c) out = hn::MulAdd(vb, n == L ? hn::LoadU(d, cr) : part::Load(d, cr, n), out); \
    if (n == L)                                                                              \
      hn::StoreU(out, d, cr);                                                                \
    else                                                                                     \
      part::Store(d, out, cr, n);                                                            \
  }
template <size_t R, bool TA, class D>
HWY_INLINE void SmallRows(D d, size_t i0, size_t n, size_t k, float alpha, const float* a,
                          size_t lda, const float* bp, size_t ldbp, float beta, float* c,
                          size_t ldc) {
  const size_t L = hn::Lanes(d);
  auto c0 = hn::Zero(d), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
  for (size_t p = 0; p < k; ++p) {
    const auto bv = hn::LoadU(d, bp + p * ldbp);
    PL_SMALL_ROW(0);
    PL_SMALL_ROW(1);
    PL_SMALL_ROW(2);
    PL_SMALL_ROW(3);
    PL_SMALL_ROW(4);
    PL_SMALL_ROW(5);
    PL_SMALL_ROW(6);
    PL_SMALL_ROW(7);
  }
  const auto va = hn::Set(d, alpha), vb = hn::Set(d, beta);
  const bool read_c = beta != 0.f;
  PL_SMALL_STORE(0);
  PL_SMALL_STORE(1);
  PL_SMALL_STORE(2);
  PL_SMALL_STORE(3);
  PL_SMALL_STORE(4);
  PL_SMALL_STORE(5);
  PL_SMALL_STORE(6);
  PL_SMALL_STORE(7);
  (void)c1, (void)c2, (void)c3, (void)c4, (void)c5, (void)c6, (void)c7;
}
#undef PL_SMALL_ROW
#undef PL_SMALL_STORE

constexpr size_t kSmallMaxK = 256;

template <class D>
void SmallGemm(D d, bool ta, bool tb, size_t m, size_t n, size_t k, float alpha, const float* a,
               size_t lda, const float* b, size_t ldb, float beta, float* c, size_t ldc) {
  const size_t L = hn::Lanes(d);
  HWY_ALIGN float packed[kSmallMaxK * 8];
  const float* bp = b;
  size_t ldbp = ldb;
  if (tb || n < L) {  // op(B) as k rows of L floats, zero after column n
    for (size_t p = 0; p < k; ++p)
      for (size_t j = 0; j < L; ++j)
        packed[p * L + j] = j < n ? (tb ? b[j * ldb + p] : b[p * ldb + j]) : 0.f;
    bp = packed;
    ldbp = L;
  }
  size_t i = 0;
  for (; i + 8 <= m; i += 8) {
    if (ta)
      SmallRows<8, true>(d, i, n, k, alpha, a, lda, bp, ldbp, beta, c, ldc);
    else
      SmallRows<8, false>(d, i, n, k, alpha, a, lda, bp, ldbp, beta, c, ldc);
  }
  for (; i < m; ++i) {
    if (ta)
      SmallRows<1, true>(d, i, n, k, alpha, a, lda, bp, ldbp, beta, c, ldc);
    else
      SmallRows<1, false>(d, i, n, k, alpha, a, lda, bp, ldbp, beta, c, ldc);
  }
}

}  // namespace

// batch x the same, at element strides stride_a/b/c. Narrow problems (n <= 4, or n <= 8 where
// vectors have 8 lanes or more) with k <= 256 take SmallGemm; the rest the general GEMM.
void GemmBatched(int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
                 const float* a, size_t lda, size_t stride_a, const float* b, size_t ldb,
                 size_t stride_b, float beta, float* c, size_t ldc, size_t stride_c, size_t batch) {
  const hn::CappedTag<float, 4> d4;
  const hn::CappedTag<float, 8> d8;
  const bool small = k > 0 && k <= kSmallMaxK && alpha != 0.f && n > 0 && m > 0;
  const bool ta = trans_a != 0, tb = trans_b != 0;
  for (size_t i = 0; i < batch; ++i) {
    const float* ai = a + i * stride_a;
    const float* bi = b + i * stride_b;
    float* ci = c + i * stride_c;
    if (small && n <= hn::Lanes(d4) && hn::Lanes(d4) == 4) {
      SmallGemm(d4, ta, tb, m, n, k, alpha, ai, lda, bi, ldb, beta, ci, ldc);
    } else if (small && n <= hn::Lanes(d8) && hn::Lanes(d8) == 8) {
      SmallGemm(d8, ta, tb, m, n, k, alpha, ai, lda, bi, ldb, beta, ci, ldc);
    } else {
      gemm_detail::Gemm(ta, tb, m, n, k, alpha, ai, lda, bi, ldb, beta, ci, ldc);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();
