// Plain-loop versions of the kernels the transformer uses, templated on the element type.
// In double they are the oracle the model is checked against (finite differences run through
// them); in float they fill any slot of the kernel table that this build has not registered
// (so the plugin runs before every kernel family has landed). Semantics follow kernels.def.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "phaselab/kernel_table.h"

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

// ---------------------------------------------------------------- float fallbacks (C signatures)
inline void gemm_f(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float* a,
                   size_t lda, const float* b, size_t ldb, float beta, float* c, size_t ldc) {
  gemm<float>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
inline void softmax_rows_f(const float* x, float* y, size_t rows, size_t cols, float scale,
                           int causal) {
  softmax_rows<float>(x, y, rows, cols, scale, causal);
}
inline void gelu_f(const float* x, float* y, size_t n) { gelu<float>(x, y, n); }
inline void gelu_bwd_f(const float* x, const float* dy, float* dx, size_t n) {
  gelu_bwd<float>(x, dy, dx, n);
}
inline void layernorm_f(const float* x, const float* g, const float* b, float* y, float* mean,
                        float* rstd, size_t rows, size_t d, float eps) {
  layernorm<float>(x, g, b, y, mean, rstd, rows, d, eps);
}
inline void layernorm_bwd_f(const float* dy, const float* x, const float* g, const float* mean,
                            const float* rstd, float* dx, float* dg, float* db, size_t rows,
                            size_t d) {
  layernorm_bwd<float>(dy, x, g, mean, rstd, dx, dg, db, rows, d);
}
inline void attention_f(const float* q, size_t ldq, const float* k, size_t ldk, const float* v,
                        size_t ldv, float* o, size_t ldo, float* p, size_t n, size_t dk, size_t dv,
                        float scale, int causal, int linear) {
  attention<float>(q, ldq, k, ldk, v, ldv, o, ldo, p, n, dk, dv, scale, causal, linear);
}
inline void attention_bwd_f(const float* q, size_t ldq, const float* k, size_t ldk, const float* v,
                            size_t ldv, const float* p, const float* d_o, size_t lddo, float* dq,
                            size_t lddq, float* dk, size_t lddk, float* dv, size_t lddv,
                            float* scratch, size_t n, size_t d_k, size_t d_v, float scale,
                            int causal, int linear) {
  attention_bwd<float>(q, ldq, k, ldk, v, ldv, p, d_o, lddo, dq, lddq, dk, lddk, dv, lddv, scratch,
                       n, d_k, d_v, scale, causal, linear);
}
inline void adamw_f(float* param, const float* grad, float* m, float* v, size_t n, float lr,
                    float beta1, float beta2, float eps, float wd, int64_t step) {
  const double c1 = 1 - std::pow(double(beta1), double(step));
  const double c2 = 1 - std::pow(double(beta2), double(step));
  for (size_t i = 0; i < n; ++i) {
    m[i] = beta1 * m[i] + (1 - beta1) * grad[i];
    v[i] = beta2 * v[i] + (1 - beta2) * grad[i] * grad[i];
    const double mh = m[i] / c1, vh = v[i] / c2;
    param[i] = float(param[i] - lr * (mh / (std::sqrt(vh) + eps) + wd * param[i]));
  }
}

// Philox4x32-10 (Salmon et al. 2011): key = seed, counter = (block lo, block hi, stream lo,
// stream hi); word i of a stream is lane i % 4 of block i / 4 (kernels.def, uniform_bits).
inline void philox_block(uint64_t seed, uint64_t stream, uint64_t block, uint32_t out[4]) {
  uint32_t c0 = uint32_t(block), c1 = uint32_t(block >> 32), c2 = uint32_t(stream),
           c3 = uint32_t(stream >> 32);
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = uint64_t(0xD2511F53u) * c0, p1 = uint64_t(0xCD9E8D57u) * c2;
    const uint32_t h0 = uint32_t(p0 >> 32), l0 = uint32_t(p0), h1 = uint32_t(p1 >> 32),
                   l1 = uint32_t(p1);
    c0 = h1 ^ c1 ^ k0;
    c1 = l1;
    c2 = h0 ^ c3 ^ k1;
    c3 = l0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}
inline void uniform_bits_f(uint32_t* out, size_t n, uint64_t seed, uint64_t stream,
                           uint64_t counter) {
  uint32_t blk[4];
  for (size_t i = 0; i < n; ++i) {
    const uint64_t w = counter + i;
    philox_block(seed, stream, w / 4, blk);
    out[i] = blk[w % 4];
  }
}
// Box-Muller on lane pairs (0,1), (2,3) of each block; used only for initial weights.
inline void gaussian_f(float* out, size_t n, uint64_t seed, uint64_t stream, uint64_t counter) {
  uint32_t blk[4];
  for (size_t i = 0; i < n; ++i) {
    const uint64_t w = counter + i;
    philox_block(seed, stream, w / 4, blk);
    const int pair = int(w % 4) / 2, lane = int(w % 2);
    const double u1 = (double(blk[2 * pair]) + 1.0) / 4294967296.0;
    const double u2 = double(blk[2 * pair + 1]) / 4294967296.0;
    const double r = std::sqrt(-2 * std::log(u1)), th = 6.283185307179586 * u2;
    out[i] = float(lane == 0 ? r * std::cos(th) : r * std::sin(th));
  }
}

}  // namespace ref

// A copy of `in` with every kernel the model needs present: missing slots (families not yet
// built) take the plain-loop fallback above. Returns how many slots were filled.
inline int fill_missing(pl_kernel_table* t) {
  int filled = 0;
#define MK_FILL(slot, fn)           \
  if (!t->slot) {                   \
    t->slot = &ref::fn;             \
    t->variant.slot = "markov.ref"; \
    ++filled;                       \
  }
  MK_FILL(gemm, gemm_f)
  MK_FILL(softmax_rows, softmax_rows_f)
  MK_FILL(gelu, gelu_f)
  MK_FILL(gelu_bwd, gelu_bwd_f)
  MK_FILL(layernorm, layernorm_f)
  MK_FILL(layernorm_bwd, layernorm_bwd_f)
  MK_FILL(attention, attention_f)
  MK_FILL(attention_bwd, attention_bwd_f)
  MK_FILL(adamw, adamw_f)
  MK_FILL(uniform_bits, uniform_bits_f)
  MK_FILL(gaussian, gaussian_f)
#undef MK_FILL
  return filled;
}

}  // namespace pl::markov
