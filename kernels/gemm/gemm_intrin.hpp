// SPDX-License-Identifier: Apache-2.0
// The intrinsics GEMM of one ISA (gemm_intrin.cc), for the other intrinsics families of the
// same ISA (attention_intrin.cc): the plain product and its triangular forms.
#pragma once

#include <cstddef>

#include "kernels/common/intrin_ops.hpp"

namespace pl::PL_INTRIN_NS {

// Which triangle GemmTri computes (see gemm_intrin.cc).
enum GemmTriangle : int { kTriNone = 0, kTriLowerC = 1, kTriDepthUpTo = 2, kTriDepthFrom = 3 };

// C (m x n) = alpha op(A) op(B) + beta C; op(A): m x k, op(B): k x n, all row-major.
void Gemm(int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha, const float* a,
          size_t lda, const float* b, size_t ldb, float beta, float* c, size_t ldc);

// The same restricted to a triangle of C (tri = kTriLowerC) or of op(A) (kTriDepthUpTo,
// kTriDepthFrom); kTriNone is Gemm.
void GemmTri(int tri, int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
             const float* a, size_t lda, const float* b, size_t ldb, float beta, float* c,
             size_t ldc);

// The depth block Gemm sums column col of an n-wide C in (its panel's: full panels, then the
// narrowest that holds the rest), for products outside Gemm that must split their sums where it
// does (attention_intrin.cc's fused path keeps the GEMM path's bits this way).
size_t GemmDepthBlock(size_t n, size_t col);

}  // namespace pl::PL_INTRIN_NS
