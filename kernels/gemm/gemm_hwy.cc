// gemm.hwy.<isa>, gemm_batched.hwy.<isa>: the register-blocked GEMM of gemm-inl.h, all targets.
// foreach_target.h must follow HWY_TARGET_INCLUDE and precede the other includes.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gemm/gemm_hwy.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/gemm/gemm-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace pl {
namespace HWY_NAMESPACE {

// C (m x n) = alpha * op(A) (m x k) op(B) (k x n) + beta * C
void Gemm(int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha, const float* a,
          size_t lda, const float* b, size_t ldb, float beta, float* c, size_t ldc) {
  gemm_detail::Gemm(trans_a != 0, trans_b != 0, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// batch x the same, at element strides stride_a/b/c
void GemmBatched(int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha,
                 const float* a, size_t lda, size_t stride_a, const float* b, size_t ldb,
                 size_t stride_b, float beta, float* c, size_t ldc, size_t stride_c, size_t batch) {
  for (size_t i = 0; i < batch; ++i)
    gemm_detail::Gemm(trans_a != 0, trans_b != 0, m, n, k, alpha, a + i * stride_a, lda,
                      b + i * stride_b, ldb, beta, c + i * stride_c, ldc);
}

}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();
