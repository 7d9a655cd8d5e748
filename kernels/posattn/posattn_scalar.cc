// posattn.scalar, posattn_bwd.scalar: the reference, plain loops in double.
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

}  // namespace pl::scalar
