// SPDX-License-Identifier: Apache-2.0
// attention.intrin.<isa>, attention_bwd.intrin.<isa>: one head, fused as blocks of rows around
// the intrinsics GEMM (gemm_intrin.cc) and row softmax (softmax_intrin.cc) of the same ISA.
// With a causal mask only the blocks on or below the diagonal are computed: row block
// [i0, i1) of S = scale Q K^T needs columns [0, i1) only, and every product that follows
// (O = P V, dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q) skips the zero upper triangle the
// same way, which halves the work against a dense GEMM formulation.
#include <algorithm>
#include <cstring>

#include "kernels/common/intrin_ops.hpp"

namespace pl::PL_INTRIN_NS {

void Gemm(int trans_a, int trans_b, size_t m, size_t n, size_t k, float alpha, const float* a,
          size_t lda, const float* b, size_t ldb, float beta, float* c, size_t ldc);

namespace {

constexpr size_t kBlock = 32;  // rows per causal block

// x[0:len) = softmax(x[0:len)) in place (the scale is already in x): stable (subtracts the row
// max), exp of kernels/common/intrin_ops.hpp and a float row sum. Attention's budget (1e-5 scaled
// by sqrt(n)) does not need softmax_rows' compensated exponent and double sum.
void softmax_row_fast(float* x, size_t len) {
  V m0 = set1(-__builtin_inff()), m1 = m0;
  size_t c = 0;
  for (; c + 2 * kW <= len; c += 2 * kW) {
    m0 = max(m0, load(x + c));
    m1 = max(m1, load(x + c + kW));
  }
  for (; c < len; c += kW)
    m0 = max(m0, mask_after(c + kW <= len ? load(x + c) : load_n(x + c, len - c), c, len - 1,
                            set1(-__builtin_inff())));
  const V vm = set1(reduce_max(max(m0, m1)));
  V s0 = zero(), s1 = zero();
  for (c = 0; c + 2 * kW <= len; c += 2 * kW) {
    const V e0 = exp(sub(load(x + c), vm)), e1 = exp(sub(load(x + c + kW), vm));
    store(x + c, e0);
    store(x + c + kW, e1);
    s0 = add(s0, e0);
    s1 = add(s1, e1);
  }
  for (; c < len; c += kW) {
    const size_t w = len - c < kW ? len - c : kW;
    const V e = mask_after(exp(sub(load_n(x + c, w), vm)), c, len - 1, zero());
    store_n(x + c, e, w);
    s0 = add(s0, e);
  }
  const V inv = set1(1.0f / reduce_add(add(s0, s1)));
  for (c = 0; c + kW <= len; c += kW) store(x + c, mul(load(x + c), inv));
  if (c < len) store_n(x + c, mul(load_n(x + c, len - c), inv), len - c);
}

// ds[0:len) = scale * p .* (ds - <p, ds>)  (softmax backward; ds holds dP on entry)
void softmax_bwd_row(const float* p, float* ds, size_t len, float scale) {
  V d0 = zero(), d1 = zero();
  size_t c = 0;
  for (; c + 2 * kW <= len; c += 2 * kW) {
    d0 = fma(load(p + c), load(ds + c), d0);
    d1 = fma(load(p + c + kW), load(ds + c + kW), d1);
  }
  for (; c < len; c += kW) {
    const size_t w = len - c < kW ? len - c : kW;
    d0 = fma(load_n(p + c, w), load_n(ds + c, w), d0);
  }
  const V vdot = set1(reduce_add(add(d0, d1))), vs = set1(scale);
  for (c = 0; c + kW <= len; c += kW)
    store(ds + c, mul(mul(load(p + c), vs), sub(load(ds + c), vdot)));
  if (c < len)
    store_n(ds + c, mul(mul(load_n(p + c, len - c), vs), sub(load_n(ds + c, len - c), vdot)),
            len - c);
}

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
  const size_t bs = causal ? kBlock : n;
  for (size_t i0 = 0; i0 < n; i0 += bs) {
    const size_t i1 = std::min(n, i0 + bs);
    const size_t cols = causal ? i1 : n;  // columns this block of rows can see
    // S[i0:i1, 0:cols) = scale Q[i0:i1] K[0:cols)^T, straight into p
    Gemm(0, 1, i1 - i0, cols, d_k, scale, q + i0 * ldq, ldq, k, ldk, 0.0f, p + i0 * n, n);
    for (size_t r = i0; r < i1; ++r) {
      const size_t len = causal ? r + 1 : n;
      if (!linear) softmax_row_fast(p + r * n, len);
      std::fill(p + r * n + len, p + (r + 1) * n, 0.0f);
    }
    // O[i0:i1] = P[i0:i1, 0:cols) V[0:cols)
    Gemm(0, 0, i1 - i0, d_v, cols, 1.0f, p + i0 * n, n, v, ldv, 0.0f, o + i0 * ldo, ldo);
  }
}

// dV = P^T dO; dP = dO V^T; dS = scale P .* (dP - rowsum(P .* dP)) (or scale dP), zero where
// masked; dQ = dS K; dK = dS^T Q. scratch (n x n) holds dS.
void AttentionBwd(const float* q, size_t ldq, const float* k, size_t ldk, const float* v,
                  size_t ldv, const float* p, const float* d_o, size_t lddo, float* dq, size_t lddq,
                  float* dk, size_t lddk, float* dv, size_t lddv, float* scratch, size_t n,
                  size_t d_k, size_t d_v, float scale, int causal, int linear) {
  if (n == 0) return;
  float* ds = scratch;
  const size_t bs = causal ? kBlock : n;
  // Row blocks of dP / dS (lower triangle only when causal), then dQ for those rows.
  for (size_t i0 = 0; i0 < n; i0 += bs) {
    const size_t i1 = std::min(n, i0 + bs);
    const size_t cols = causal ? i1 : n;
    // dP[i0:i1, 0:cols) = dO[i0:i1] V[0:cols)^T
    Gemm(0, 1, i1 - i0, cols, d_v, 1.0f, d_o + i0 * lddo, lddo, v, ldv, 0.0f, ds + i0 * n, n);
    for (size_t r = i0; r < i1; ++r) {
      const size_t len = causal ? r + 1 : n;
      if (!linear)
        softmax_bwd_row(p + r * n, ds + r * n, len, scale);
      else
        scale_row(ds + r * n, len, scale);
      std::fill(ds + r * n + len, ds + (r + 1) * n, 0.0f);
    }
    // dQ[i0:i1] = dS[i0:i1, 0:cols) K[0:cols)
    Gemm(0, 0, i1 - i0, d_k, cols, 1.0f, ds + i0 * n, n, k, ldk, 0.0f, dq + i0 * lddq, lddq);
  }
  // Column blocks: dV[c0:c1] = P[r0:n, c0:c1]^T dO[r0:n], dK[c0:c1] = dS[r0:n, c0:c1]^T Q[r0:n],
  // where r0 = c0 under the causal mask (rows above c0 are zero in these columns).
  for (size_t c0 = 0; c0 < n; c0 += bs) {
    const size_t c1 = std::min(n, c0 + bs);
    const size_t r0 = causal ? c0 : 0;
    Gemm(1, 0, c1 - c0, d_v, n - r0, 1.0f, p + r0 * n + c0, n, d_o + r0 * lddo, lddo, 0.0f,
         dv + c0 * lddv, lddv);
    Gemm(1, 0, c1 - c0, d_k, n - r0, 1.0f, ds + r0 * n + c0, n, q + r0 * ldq, ldq, 0.0f,
         dk + c0 * lddk, lddk);
  }
}

}  // namespace pl::PL_INTRIN_NS
