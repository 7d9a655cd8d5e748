// SPDX-License-Identifier: Apache-2.0
// attention.hwy.<isa>, attention_bwd.hwy.<isa>: one head, fused as GEMMs (gemm-inl.h) around the
// row softmax / softmax backward of softmax_row-inl.h under its fast policy (the header says why),
// all targets.
// foreach_target.h must follow HWY_TARGET_INCLUDE and precede the other includes.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention/attention_hwy.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstring>

#include "kernels/gemm/gemm-inl.h"
#include "kernels/softmax/softmax_row-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace pl {
namespace HWY_NAMESPACE {

// q, k: n x d_k; v, o: n x d_v; p: n x n.
void Attention(const float* q, size_t ldq, const float* k, size_t ldk, const float* v, size_t ldv,
               float* o, size_t ldo, float* p, size_t n, size_t d_k, size_t d_v, float scale,
               int causal, int linear) {
  if (n == 0) return;
  // S = scale Q K^T  (n x n), straight into p
  gemm_detail::Gemm(false, true, n, n, d_k, scale, q, ldq, k, ldk, 0.f, p, n);
  // P = softmax(S) in place (the scale is already in S), zero where masked
  if (!linear) {
    softmax::Rows<softmax::Accuracy::kFast>(p, p, n, n, 1.f, causal);
  } else {
    for (size_t r = 0; r < n; ++r) {
      const size_t len = softmax::ActiveLength(r, n, causal);
      if (len < n) std::memset(p + r * n + len, 0, (n - len) * sizeof(float));
    }
  }
  // O = P V  (n x d_v)
  gemm_detail::Gemm(false, false, n, d_v, n, 1.f, p, n, v, ldv, 0.f, o, ldo);
}

void AttentionBwd(const float* q, size_t ldq, const float* k, size_t ldk, const float* v,
                  size_t ldv, const float* p, const float* d_o, size_t lddo, float* dq, size_t lddq,
                  float* dk, size_t lddk, float* dv, size_t lddv, float* scratch, size_t n,
                  size_t d_k, size_t d_v, float scale, int causal, int linear) {
  if (n == 0) return;
  // dV = P^T dO  (n x d_v)
  gemm_detail::Gemm(true, false, n, d_v, n, 1.f, p, n, d_o, lddo, 0.f, dv, lddv);
  // dP = dO V^T  (n x n), in scratch
  float* ds = scratch;
  gemm_detail::Gemm(false, true, n, n, d_v, 1.f, d_o, lddo, v, ldv, 0.f, ds, n);
  // dS = scale * softmax'(dP) (or scale * dP), zero where masked
  if (!linear) {
    softmax::RowsBwd<softmax::Accuracy::kFast>(p, ds, ds, n, n, scale, causal);
  } else {
    for (size_t r = 0; r < n; ++r) {
      const size_t len = softmax::ActiveLength(r, n, causal);
      float* row = ds + r * n;
      for (size_t c = 0; c < len; ++c) row[c] *= scale;
      if (len < n) std::memset(row + len, 0, (n - len) * sizeof(float));
    }
  }
  // dQ = dS K  (n x d_k);  dK = dS^T Q  (n x d_k)
  gemm_detail::Gemm(false, false, n, d_k, n, 1.f, ds, n, k, ldk, 0.f, dq, lddq);
  gemm_detail::Gemm(true, false, n, d_k, n, 1.f, ds, n, q, ldq, 0.f, dk, lddk);
}

}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();
