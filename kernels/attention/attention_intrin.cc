// SPDX-License-Identifier: Apache-2.0
// attention.intrin.<isa>, attention_bwd.intrin.<isa>: one head, the intrinsics GEMM
// (gemm_intrin.cc) of the same ISA around a row softmax. With a causal mask every product
// skips the register tiles of the zero upper triangle (GemmTri): S = scale Q K^T and
// dP = dO V^T compute only tiles on or left of the diagonal, O = P V and dQ = dS K stop each
// row's sum at its tile's diagonal, dV = P^T dO and dK = dS^T Q start it there. Operands are
// packed once per product (row blocks would repack K and V once per block), so the causal pass
// does about half the dense work.
#include <algorithm>
#include <cstring>

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

}  // namespace

// q, k: n x d_k; v, o: n x d_v; p: n x n (written, kept for the backward pass).
void Attention(const float* q, size_t ldq, const float* k, size_t ldk, const float* v, size_t ldv,
               float* o, size_t ldo, float* p, size_t n, size_t d_k, size_t d_v, float scale,
               int causal, int linear) {
  if (n == 0) return;
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
// tiles of the zero upper triangle of P and dS (GemmTri), which halves the work.
void AttentionBwd(const float* q, size_t ldq, const float* k, size_t ldk, const float* v,
                  size_t ldv, const float* p, const float* d_o, size_t lddo, float* dq, size_t lddq,
                  float* dk, size_t lddk, float* dv, size_t lddv, float* scratch, size_t n,
                  size_t d_k, size_t d_v, float scale, int causal, int linear) {
  if (n == 0) return;
  float* ds = scratch;
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
