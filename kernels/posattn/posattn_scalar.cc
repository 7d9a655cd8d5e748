// posattn.scalar, posattn_bwd.scalar, posattn_onehot_sse.scalar: the reference, plain loops in double.
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

// One-hot tokens, fused squared loss: h[mu] = A X[mu], r = h W^T - Y[mu] (rows with y = -1 zero);
// sse = sum r^2; da = 2 sum_mu (r W) X[mu]^T, dw = 2 sum_mu r^T h. Dense one-hot X, Y in double.
double PosattnOnehotSse(const float* a, const float* w, const int32_t* x_tok, const int32_t* y_tok,
                        float* da, float* dw, size_t p, size_t l, size_t v) {
  std::vector<double> x(l * v), h(l * v), r(l * v), dh(l * v), dad(l * l, 0.0), dwd(v * v, 0.0);
  double sse = 0;
  for (size_t mu = 0; mu < p; ++mu) {
    const int32_t* xt = x_tok + mu * l;
    const int32_t* yt = y_tok + mu * l;
    std::fill(x.begin(), x.end(), 0.0);
    for (size_t k = 0; k < l; ++k) x[k * v + size_t(xt[k])] = 1.0;
    for (size_t i = 0; i < l; ++i)
      for (size_t u = 0; u < v; ++u) {
        double s = 0;
        for (size_t k = 0; k < l; ++k) s += double(a[i * l + k]) * x[k * v + u];
        h[i * v + u] = s;
      }
    for (size_t i = 0; i < l; ++i)
      for (size_t o = 0; o < v; ++o) {
        double s = 0;
        for (size_t u = 0; u < v; ++u) s += h[i * v + u] * w[o * v + u];
        r[i * v + o] = yt[i] < 0 ? 0.0 : s - (yt[i] == int32_t(o) ? 1.0 : 0.0);
        sse += r[i * v + o] * r[i * v + o];
      }
    if (!da) continue;
    for (size_t i = 0; i < l; ++i)
      for (size_t o = 0; o < v; ++o)
        for (size_t u = 0; u < v; ++u) dwd[o * v + u] += 2 * r[i * v + o] * h[i * v + u];
    for (size_t i = 0; i < l; ++i)
      for (size_t u = 0; u < v; ++u) {
        double s = 0;
        for (size_t o = 0; o < v; ++o) s += r[i * v + o] * w[o * v + u];
        dh[i * v + u] = 2 * s;
      }
    for (size_t i = 0; i < l; ++i)
      for (size_t k = 0; k < l; ++k) {
        double s = 0;
        for (size_t u = 0; u < v; ++u) s += dh[i * v + u] * x[k * v + u];
        dad[i * l + k] += s;
      }
  }
  if (da) {
    for (size_t i = 0; i < v * v; ++i) dw[i] = static_cast<float>(dwd[i]);
    for (size_t i = 0; i < l * l; ++i) da[i] = static_cast<float>(dad[i]);
  }
  return sse;
}

}  // namespace pl::scalar
