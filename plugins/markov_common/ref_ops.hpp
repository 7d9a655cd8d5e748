// SPDX-License-Identifier: Apache-2.0
// Plain double loops of the kernels the transformer uses: Model<double> runs on them, the oracle
// the float model on the kernel table is checked against (and finite differences run through).
// Semantics follow kernels.def. The float model always uses the kernel table.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstring>

namespace pl::markov {
namespace ref {

// C (m x n) = alpha op(A) op(B) + beta C; op(A) m x k.
template <class T>
void gemm(int ta, int tb, size_t m, size_t n, size_t k, T alpha, const T* a, size_t lda, const T* b,
          size_t ldb, T beta, T* c, size_t ldc) {
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) {
      double s = 0;
      for (size_t p = 0; p < k; ++p) {
        const double av = ta ? a[p * lda + i] : a[i * lda + p];
        const double bv = tb ? b[j * ldb + p] : b[p * ldb + j];
        s += av * bv;
      }
      const double old = beta == T(0) ? 0.0 : double(beta) * double(c[i * ldc + j]);
      c[i * ldc + j] = T(double(alpha) * s + old);
    }
}

// y[r, :] = softmax(scale x[r, :]) (causal: columns c <= r only, others 0).
template <class T>
void softmax_rows(const T* x, T* y, size_t rows, size_t cols, T scale, int causal) {
  for (size_t r = 0; r < rows; ++r) {
    const size_t nc = causal ? (r + 1 < cols ? r + 1 : cols) : cols;
    double mx = -INFINITY;
    for (size_t c = 0; c < nc; ++c) mx = std::fmax(mx, double(scale) * x[r * cols + c]);
    double s = 0;
    for (size_t c = 0; c < nc; ++c) s += std::exp(double(scale) * x[r * cols + c] - mx);
    for (size_t c = 0; c < cols; ++c)
      y[r * cols + c] = c < nc ? T(std::exp(double(scale) * x[r * cols + c] - mx) / s) : T(0);
  }
}

// dx = scale y .* (dy - rowsum(dy .* y)).
template <class T>
void softmax_rows_bwd(const T* y, const T* dy, T* dx, size_t rows, size_t cols, T scale, int) {
  for (size_t r = 0; r < rows; ++r) {
    double s = 0;
    for (size_t c = 0; c < cols; ++c) s += double(dy[r * cols + c]) * y[r * cols + c];
    for (size_t c = 0; c < cols; ++c)
      dx[r * cols + c] = T(double(scale) * y[r * cols + c] * (dy[r * cols + c] - s));
  }
}

constexpr double kGeluS = 0.7978845608028654;  // sqrt(2 / pi)
template <class T>
void gelu(const T* x, T* y, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const double v = x[i];
    y[i] = T(0.5 * v * (1 + std::tanh(kGeluS * (v + 0.044715 * v * v * v))));
  }
}
template <class T>
void gelu_bwd(const T* x, const T* dy, T* dx, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const double v = x[i], t = std::tanh(kGeluS * (v + 0.044715 * v * v * v));
    const double d = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * kGeluS * (1 + 3 * 0.044715 * v * v);
    dx[i] = T(double(dy[i]) * d);
  }
}

template <class T>
void layernorm(const T* x, const T* g, const T* b, T* y, T* mean, T* rstd, size_t rows, size_t d,
               T eps) {
  for (size_t r = 0; r < rows; ++r) {
    const T* xr = x + r * d;
    double m = 0, v = 0;
    for (size_t i = 0; i < d; ++i) m += xr[i];
    m /= double(d);
    for (size_t i = 0; i < d; ++i) v += (xr[i] - m) * (xr[i] - m);
    const double rs = 1 / std::sqrt(v / double(d) + double(eps));
    for (size_t i = 0; i < d; ++i) y[r * d + i] = T((xr[i] - m) * rs * g[i] + b[i]);
    mean[r] = T(m);
    rstd[r] = T(rs);
  }
}
// Accumulates dx, dgamma, dbeta.
template <class T>
void layernorm_bwd(const T* dy, const T* x, const T* g, const T* mean, const T* rstd, T* dx, T* dg,
                   T* db, size_t rows, size_t d) {
  for (size_t r = 0; r < rows; ++r) {
    const T *dyr = dy + r * d, *xr = x + r * d;
    double a = 0, bsum = 0;  // mean(dy g), mean(dy g xhat)
    for (size_t i = 0; i < d; ++i) {
      const double xh = (xr[i] - double(mean[r])) * rstd[r];
      a += double(dyr[i]) * g[i];
      bsum += double(dyr[i]) * g[i] * xh;
    }
    a /= double(d);
    bsum /= double(d);
    for (size_t i = 0; i < d; ++i) {
      const double xh = (xr[i] - double(mean[r])) * rstd[r];
      dx[r * d + i] += T(double(rstd[r]) * (double(dyr[i]) * g[i] - a - xh * bsum));
      dg[i] += T(double(dyr[i]) * xh);
      db[i] += dyr[i];
    }
  }
}

// One head: P = causal/softmax(scale Q K^T) (or the scaled scores when linear), O = P V.
template <class T>
void attention(const T* q, size_t ldq, const T* k, size_t ldk, const T* v, size_t ldv, T* o,
               size_t ldo, T* p, size_t n, size_t dk, size_t dv, T scale, int causal, int linear) {
  for (size_t r = 0; r < n; ++r) {
    for (size_t c = 0; c < n; ++c) {
      double s = 0;
      for (size_t i = 0; i < dk; ++i) s += double(q[r * ldq + i]) * k[c * ldk + i];
      p[r * n + c] = T(s);
    }
    const size_t nc = causal ? r + 1 : n;  // columns taking part
    if (linear) {
      for (size_t c = 0; c < n; ++c) p[r * n + c] = c < nc ? T(double(scale) * p[r * n + c]) : T(0);
    } else {
      double mx = -INFINITY, z = 0;
      for (size_t c = 0; c < nc; ++c) mx = std::fmax(mx, double(scale) * p[r * n + c]);
      for (size_t c = 0; c < nc; ++c) z += std::exp(double(scale) * p[r * n + c] - mx);
      for (size_t c = 0; c < n; ++c)
        p[r * n + c] = c < nc ? T(std::exp(double(scale) * p[r * n + c] - mx) / z) : T(0);
    }
    for (size_t i = 0; i < dv; ++i) {
      double s = 0;
      for (size_t c = 0; c < n; ++c) s += double(p[r * n + c]) * v[c * ldv + i];
      o[r * ldo + i] = T(s);
    }
  }
}

// dV = P^T dO; dP = dO V^T; dS = P (dP - rowsum(dP P)) (softmax) or dP; dQ = scale dS K,
// dK = scale dS^T Q. Overwrites dq, dk, dv; scratch holds dS (n x n).
template <class T>
void attention_bwd(const T* q, size_t ldq, const T* k, size_t ldk, const T* v, size_t ldv,
                   const T* p, const T* d_o, size_t lddo, T* dq, size_t lddq, T* dk, size_t lddk,
                   T* dv, size_t lddv, T* scratch, size_t n, size_t d_k, size_t d_v, T scale,
                   int causal, int linear) {
  for (size_t c = 0; c < n; ++c)
    for (size_t i = 0; i < d_v; ++i) {
      double s = 0;
      for (size_t r = 0; r < n; ++r) s += double(p[r * n + c]) * d_o[r * lddo + i];
      dv[c * lddv + i] = T(s);
    }
  for (size_t r = 0; r < n; ++r) {
    double rs = 0;
    for (size_t c = 0; c < n; ++c) {
      double dp = 0;
      for (size_t i = 0; i < d_v; ++i) dp += double(d_o[r * lddo + i]) * v[c * ldv + i];
      scratch[r * n + c] = T(dp);
      rs += dp * p[r * n + c];
    }
    for (size_t c = 0; c < n; ++c) {
      const double ds =
          linear ? double(scratch[r * n + c]) : double(p[r * n + c]) * (scratch[r * n + c] - rs);
      scratch[r * n + c] = (causal && c > r) ? T(0) : T(ds);
    }
  }
  for (size_t r = 0; r < n; ++r)
    for (size_t i = 0; i < d_k; ++i) {
      double s = 0;
      for (size_t c = 0; c < n; ++c) s += double(scratch[r * n + c]) * k[c * ldk + i];
      dq[r * lddq + i] = T(double(scale) * s);
    }
  for (size_t c = 0; c < n; ++c)
    for (size_t i = 0; i < d_k; ++i) {
      double s = 0;
      for (size_t r = 0; r < n; ++r) s += double(scratch[r * n + c]) * q[r * ldq + i];
      dk[c * lddk + i] = T(double(scale) * s);
    }
}

}  // namespace ref

}  // namespace pl::markov
