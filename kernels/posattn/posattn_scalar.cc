// SPDX-License-Identifier: Apache-2.0
// posattn.scalar, posattn_bwd.scalar, posattn_onehot_sse(_rows).scalar,
// posattn_onehot_stats.scalar, posattn_gram_sse.scalar: the reference, plain loops in double.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "phaselab/kernels.hpp"

namespace pl::scalar {

// a: L x L, x: p x L x V, w: V x V. h[mu] = A X[mu] (L x V), f[mu] = h[mu] W^T (L x V).
void Posattn(const float* a, const float* x, const float* w, float* h, float* f, size_t p, size_t l,
             size_t v) {
  std::vector<double> hd(l * v);
  for (size_t mu = 0; mu < p; ++mu) {
    const float* xm = x + mu * l * v;
    for (size_t i = 0; i < l; ++i)
      for (size_t u = 0; u < v; ++u) {
        double s = 0;
        for (size_t k = 0; k < l; ++k) s += double(a[i * l + k]) * xm[k * v + u];
        hd[i * v + u] = s;
        h[mu * l * v + i * v + u] = static_cast<float>(s);
      }
    for (size_t i = 0; i < l; ++i)
      for (size_t o = 0; o < v; ++o) {
        double s = 0;
        for (size_t u = 0; u < v; ++u) s += hd[i * v + u] * w[o * v + u];
        f[mu * l * v + i * v + o] = static_cast<float>(s);
      }
  }
}

// dw = sum_mu df[mu]^T h[mu] (V x V); dh = df W (p x L x V); da = sum_mu dh[mu] X[mu]^T (L x L).
void PosattnBwd(const float* a, const float* x, const float* w, const float* h, const float* df,
                float* da, float* dw, float* dh, size_t p, size_t l, size_t v) {
  (void)a;  // the gradients are linear in A's cotangent; A itself is not needed
  const size_t rows = p * l;
  std::vector<double> dwd(v * v, 0.0), dad(l * l, 0.0), dhd(l * v);
  for (size_t r = 0; r < rows; ++r)
    for (size_t o = 0; o < v; ++o)
      for (size_t u = 0; u < v; ++u) dwd[o * v + u] += double(df[r * v + o]) * h[r * v + u];
  for (size_t mu = 0; mu < p; ++mu) {
    const float* xm = x + mu * l * v;
    for (size_t i = 0; i < l; ++i)
      for (size_t u = 0; u < v; ++u) {
        double s = 0;
        for (size_t o = 0; o < v; ++o) s += double(df[(mu * l + i) * v + o]) * w[o * v + u];
        dhd[i * v + u] = s;
        dh[(mu * l + i) * v + u] = static_cast<float>(s);
      }
    for (size_t i = 0; i < l; ++i)
      for (size_t k = 0; k < l; ++k) {
        double s = 0;
        for (size_t u = 0; u < v; ++u) s += dhd[i * v + u] * xm[k * v + u];
        dad[i * l + k] += s;
      }
  }
  for (size_t i = 0; i < v * v; ++i) dw[i] = static_cast<float>(dwd[i]);
  for (size_t i = 0; i < l * l; ++i) da[i] = static_cast<float>(dad[i]);
}

// One-hot tokens, fused squared loss over output rows [i0, i1): h[mu] = A X[mu],
// r = h W^T - Y[mu] (rows with y = -1 or outside [i0, i1) zero); sse = sum r^2;
// da rows [i0, i1) = 2 sum_mu (r W) X[mu]^T (other rows untouched), dw = 2 sum_mu r^T h.
// Dense one-hot X, Y in double.
double PosattnOnehotSseRows(const float* a, const float* w, const int32_t* x_tok,
                            const int32_t* y_tok, float* da, float* dw, size_t p, size_t l,
                            size_t v, size_t i0, size_t i1) {
  i1 = std::min(i1, l);
  i0 = std::min(i0, i1);
  std::vector<double> x(l * v), h(l * v), r(l * v), dh(l * v), dad(l * l, 0.0), dwd(v * v, 0.0);
  double sse = 0;
  for (size_t mu = 0; mu < p; ++mu) {
    const int32_t* xt = x_tok + mu * l;
    const int32_t* yt = y_tok + mu * l;
    std::fill(x.begin(), x.end(), 0.0);
    for (size_t k = 0; k < l; ++k) x[k * v + size_t(xt[k])] = 1.0;
    for (size_t i = i0; i < i1; ++i)
      for (size_t u = 0; u < v; ++u) {
        double s = 0;
        for (size_t k = 0; k < l; ++k) s += double(a[i * l + k]) * x[k * v + u];
        h[i * v + u] = s;
      }
    for (size_t i = i0; i < i1; ++i)
      for (size_t o = 0; o < v; ++o) {
        double s = 0;
        for (size_t u = 0; u < v; ++u) s += h[i * v + u] * w[o * v + u];
        r[i * v + o] = yt[i] < 0 ? 0.0 : s - (yt[i] == int32_t(o) ? 1.0 : 0.0);
        sse += r[i * v + o] * r[i * v + o];
      }
    if (!da) continue;
    for (size_t i = i0; i < i1; ++i)
      for (size_t o = 0; o < v; ++o)
        for (size_t u = 0; u < v; ++u) dwd[o * v + u] += 2 * r[i * v + o] * h[i * v + u];
    for (size_t i = i0; i < i1; ++i)
      for (size_t u = 0; u < v; ++u) {
        double s = 0;
        for (size_t o = 0; o < v; ++o) s += r[i * v + o] * w[o * v + u];
        dh[i * v + u] = 2 * s;
      }
    for (size_t i = i0; i < i1; ++i)
      for (size_t k = 0; k < l; ++k) {
        double s = 0;
        for (size_t u = 0; u < v; ++u) s += dh[i * v + u] * x[k * v + u];
        dad[i * l + k] += s;
      }
  }
  if (da) {
    for (size_t i = 0; i < v * v; ++i) dw[i] = static_cast<float>(dwd[i]);
    for (size_t i = i0 * l; i < i1 * l; ++i) da[i] = static_cast<float>(dad[i]);
  }
  return sse;
}

double PosattnOnehotSse(const float* a, const float* w, const int32_t* x_tok, const int32_t* y_tok,
                        float* da, float* dw, size_t p, size_t l, size_t v) {
  return PosattnOnehotSseRows(a, w, x_tok, y_tok, da, dw, p, l, v, 0, l);
}

// Counts of p sequences, added to c and d (layouts in kernels.def).
void PosattnOnehotStats(const int32_t* x_tok, const int32_t* y_tok, double* c, double* d, size_t p,
                        size_t l, size_t v) {
  const size_t ll = l * l;
  for (size_t mu = 0; mu < p; ++mu) {
    const int32_t* xt = x_tok + mu * l;
    const int32_t* yt = y_tok + mu * l;
    for (size_t k = 0; k < l; ++k)
      for (size_t k2 = 0; k2 < l; ++k2)
        c[(size_t(xt[k]) * v + size_t(xt[k2])) * ll + k * l + k2] += 1;
    for (size_t i = 0; i < l; ++i) {
      if (yt[i] < 0) continue;
      for (size_t k = 0; k < l; ++k) d[(size_t(yt[i]) * v + size_t(xt[k])) * ll + i * l + k] += 1;
    }
  }
}

// sse and gradients from the counts, plain loops in double (formulas in kernels.def):
//   da = 2 (A S - T) on loss rows, dw = 2 (W R - E),
//   R[u, u'] = sum_{k,k'} Q[k, k'] c[u, u', k, k'], Q = sum_{i in loss} A_i^T A_i,
//   E[o, u] = sum_{i,k} A_ik d[o, u, i, k].
double PosattnGramSse(const float* a, const float* w, const double* c, const double* d, float* da,
                      float* dw, size_t l, size_t v) {
  const size_t vv = v * v, ll = l * l;
  std::vector<double> m(vv, 0.0), s(ll, 0.0), t(ll, 0.0), q(ll, 0.0), r(vv, 0.0), e(vv, 0.0);
  std::vector<char> row(l);
  double n_loss = 0;
  for (size_t i = 0; i < l; ++i) {
    double ni = 0;  // sequences with a target at row i: the k = 0 column counts each once
    for (size_t j = 0; j < vv; ++j) ni += d[j * ll + i * l];
    row[i] = ni > 0;
    n_loss += ni;
  }
  for (size_t u = 0; u < v; ++u)
    for (size_t u2 = 0; u2 < v; ++u2)
      for (size_t o = 0; o < v; ++o) m[u * v + u2] += double(w[o * v + u]) * w[o * v + u2];
  for (size_t i = 0; i < l; ++i) {
    if (!row[i]) continue;
    for (size_t k = 0; k < l; ++k)
      for (size_t k2 = 0; k2 < l; ++k2) q[k * l + k2] += double(a[i * l + k]) * a[i * l + k2];
  }
  for (size_t j = 0; j < vv; ++j)
    for (size_t kk = 0; kk < ll; ++kk) {
      s[kk] += c[j * ll + kk] * m[j];
      t[kk] += d[j * ll + kk] * double(w[j]);
      r[j] += q[kk] * c[j * ll + kk];
      e[j] += double(a[kk]) * d[j * ll + kk];
    }
  double quad = 0, lin = 0;
  for (size_t kk = 0; kk < ll; ++kk) {
    quad += q[kk] * s[kk];
    lin += double(a[kk]) * t[kk];
  }
  if (da) {
    for (size_t i = 0; i < l; ++i)
      for (size_t k = 0; k < l; ++k) {
        double as = 0;
        if (row[i])
          for (size_t k2 = 0; k2 < l; ++k2) as += double(a[i * l + k2]) * s[k2 * l + k];
        da[i * l + k] = static_cast<float>(2 * (as - t[i * l + k]));
      }
    for (size_t o = 0; o < v; ++o)
      for (size_t u = 0; u < v; ++u) {
        double wr = 0;
        for (size_t u2 = 0; u2 < v; ++u2) wr += double(w[o * v + u2]) * r[u2 * v + u];
        dw[o * v + u] = static_cast<float>(2 * (wr - e[o * v + u]));
      }
  }
  return quad - 2 * lin + n_loss;
}

}  // namespace pl::scalar
