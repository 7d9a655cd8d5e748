// SPDX-License-Identifier: Apache-2.0
// attention.scalar, attention_bwd.scalar: the reference, plain loops in double.
#include <cmath>
#include <vector>

#include "phaselab/kernels.hpp"

namespace pl::scalar {

// q, k: n x d_k; v, o: n x d_v; p: n x n (written).
// S = scale Q K^T; P = softmax_rows(S) or S (linear); causal: P[r, c] = 0 for c > r; O = P V.
void Attention(const float* q, size_t ldq, const float* k, size_t ldk, const float* v, size_t ldv,
               float* o, size_t ldo, float* p, size_t n, size_t d_k, size_t d_v, float scale,
               int causal, int linear) {
  std::vector<double> prow(n);
  for (size_t r = 0; r < n; ++r) {
    const size_t len = causal ? r + 1 : n;  // columns that take part
    double mx = -INFINITY;
    for (size_t c = 0; c < len; ++c) {
      double s = 0;
      for (size_t t = 0; t < d_k; ++t) s += double(q[r * ldq + t]) * k[c * ldk + t];
      prow[c] = scale * s;
      mx = std::max(mx, prow[c]);
    }
    if (!linear) {
      double sum = 0;
      for (size_t c = 0; c < len; ++c) sum += (prow[c] = std::exp(prow[c] - mx));
      for (size_t c = 0; c < len; ++c) prow[c] /= sum;
    }
    for (size_t c = len; c < n; ++c) prow[c] = 0;
    for (size_t c = 0; c < n; ++c) p[r * n + c] = static_cast<float>(prow[c]);
    for (size_t j = 0; j < d_v; ++j) {
      double s = 0;
      for (size_t c = 0; c < len; ++c) s += prow[c] * v[c * ldv + j];
      o[r * ldo + j] = static_cast<float>(s);
    }
  }
}

// dV = P^T dO; dP = dO V^T; dS = scale * (P .* (dP - rowsum(P .* dP))) (softmax) or
// scale * dP (linear), zero where masked; dQ = dS K; dK = dS^T Q.
void AttentionBwd(const float* q, size_t ldq, const float* k, size_t ldk, const float* v,
                  size_t ldv, const float* p, const float* d_o, size_t lddo, float* dq, size_t lddq,
                  float* dk, size_t lddk, float* dv, size_t lddv, float* scratch, size_t n,
                  size_t d_k, size_t d_v, float scale, int causal, int linear) {
  (void)scratch;  // the reference keeps dS in double instead
  std::vector<double> ds(n * n, 0.0);
  for (size_t r = 0; r < n; ++r) {
    const size_t len = causal ? r + 1 : n;
    double rowdot = 0;
    for (size_t c = 0; c < len; ++c) {
      double dp = 0;
      for (size_t j = 0; j < d_v; ++j) dp += double(d_o[r * lddo + j]) * v[c * ldv + j];
      ds[r * n + c] = dp;
      rowdot += dp * p[r * n + c];
    }
    for (size_t c = 0; c < len; ++c)
      ds[r * n + c] = scale * (linear ? ds[r * n + c] : p[r * n + c] * (ds[r * n + c] - rowdot));
  }
  for (size_t c = 0; c < n; ++c)
    for (size_t j = 0; j < d_v; ++j) {
      double s = 0;
      for (size_t r = 0; r < n; ++r) s += double(p[r * n + c]) * d_o[r * lddo + j];
      dv[c * lddv + j] = static_cast<float>(s);
    }
  for (size_t r = 0; r < n; ++r)
    for (size_t t = 0; t < d_k; ++t) {
      double s = 0;
      for (size_t c = 0; c < n; ++c) s += ds[r * n + c] * k[c * ldk + t];
      dq[r * lddq + t] = static_cast<float>(s);
    }
  for (size_t c = 0; c < n; ++c)
    for (size_t t = 0; t < d_k; ++t) {
      double s = 0;
      for (size_t r = 0; r < n; ++r) s += ds[r * n + c] * q[r * ldq + t];
      dk[c * lddk + t] = static_cast<float>(s);
    }
}

}  // namespace pl::scalar
