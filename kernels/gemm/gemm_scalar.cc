// SPDX-License-Identifier: Apache-2.0
// gemm.scalar, gemm_batched.scalar, gemm_epilogue.scalar: the reference, plain loops with double
// accumulation.
#include "phaselab/kernels.hpp"

namespace pl::scalar {

// C (m x n) = alpha * op(A) (m x k) op(B) (k x n) + beta * C; beta == 0: C is not read.
void Gemm(int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha, const float* a,
          size_t lda, const float* b, size_t ldb, float beta, float* c, size_t ldc) {
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < n; ++j) {
      double s = 0;
      for (size_t p = 0; p < k; ++p) {
        const double aip = trans_a ? a[p * lda + i] : a[i * lda + p];
        const double bpj = trans_b ? b[j * ldb + p] : b[p * ldb + j];
        s += aip * bpj;
      }
      double r = double(alpha) * s;
      if (beta != 0.f) r += double(beta) * c[i * ldc + j];
      c[i * ldc + j] = static_cast<float>(r);
    }
  }
}

void GemmBatched(int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
                 const float* a, size_t lda, size_t stride_a, const float* b, size_t ldb,
                 size_t stride_b, float beta, float* c, size_t ldc, size_t stride_c, size_t batch) {
  for (size_t i = 0; i < batch; ++i)
    Gemm(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
         c + i * stride_c, ldc);
}

// C = (alpha op(A) op(B)) .* E (epilogue 1) or alpha op(A) op(B) + E (2): Gemm's float result,
// then one float multiply or add per element (the same bits as Gemm followed by the loop).
void GemmEpilogue(int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
                  const float* a, size_t lda, const float* b, size_t ldb, int epilogue,
                  const float* e, size_t lde, float* c, size_t ldc) {
  Gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, 0.f, c, ldc);
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) {
      float& x = c[i * ldc + j];
      x = epilogue == 1 ? x * e[i * lde + j] : x + e[i * lde + j];
    }
}

}  // namespace pl::scalar
